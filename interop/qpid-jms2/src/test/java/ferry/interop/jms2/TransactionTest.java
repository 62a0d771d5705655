package ferry.interop.jms2;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import jakarta.jms.JMSConsumer;
import jakarta.jms.JMSContext;
import jakarta.jms.Message;
import jakarta.jms.Queue;

import org.junit.jupiter.api.Test;

/** Transacted contexts: the 1.0 transaction coordinator. */
class TransactionTest extends Support {

    @Test
    void sendsAppearOnlyAtCommit() throws Exception {
        String name = declareQueue("tx-send");
        try (JMSContext tx = context(JMSContext.SESSION_TRANSACTED); JMSContext plain = context()) {
            Queue queue = tx.createQueue(name);
            tx.createProducer().send(queue, "rolled back");
            tx.rollback();
            tx.createProducer().send(queue, "committed");
            assertEquals(0, depth(name));
            tx.commit();
            assertEquals("committed", plain.createConsumer(plain.createQueue(name))
                    .receiveBody(String.class, TIMEOUT_MS));
            assertEquals(0, depth(name));
        }
    }

    @Test
    void receivesAreUndoneByARollback() throws Exception {
        String name = declareQueue("tx-receive");
        try (JMSContext plain = context()) {
            plain.createProducer().send(plain.createQueue(name), "work");
        }
        try (JMSContext tx = context(JMSContext.SESSION_TRANSACTED)) {
            JMSConsumer consumer = tx.createConsumer(tx.createQueue(name));
            Message first = consumer.receive(TIMEOUT_MS);
            assertEquals("work", first.getBody(String.class));
            tx.rollback();
            Message again = consumer.receive(TIMEOUT_MS);
            assertEquals("work", again.getBody(String.class));
            assertTrue(again.getJMSRedelivered());
            tx.commit();
            assertNull(consumer.receive(300));
        }
        assertEquals(0, depth(name));
    }
}
