package ferry.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;

import javax.jms.Connection;
import javax.jms.Message;
import javax.jms.MessageConsumer;
import javax.jms.MessageProducer;
import javax.jms.Queue;
import javax.jms.Session;
import javax.jms.TextMessage;

import org.junit.jupiter.api.Test;

/**
 * Transacted JMS sessions (Session.SESSION_TRANSACTED), which the Qpid client maps onto the
 * 0-10 tx class: sends and acknowledgements take effect at commit, rollback discards the sends
 * and redelivers what was received.
 */
class TransactionTest extends InteropSupport {

    @Test
    void sendsAreDeliveredOnlyAfterCommit() throws Exception {
        Connection c = connect();
        String name = unique("tx.send");
        Session plain = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Queue queue = createdQueue(plain, name);
        MessageConsumer consumer = plain.createConsumer(queue);
        MessageProducer marker = plain.createProducer(queue);

        Session tx = c.createSession(true, Session.SESSION_TRANSACTED);
        MessageProducer producer = tx.createProducer(createdQueue(tx, name));
        producer.send(tx.createTextMessage("rolled-back"));
        tx.rollback();
        producer.send(tx.createTextMessage("tx-1"));
        producer.send(tx.createTextMessage("tx-2"));
        // Sent after the uncommitted ones but outside the transaction: arrives alone.
        marker.send(plain.createTextMessage("before-commit"));
        assertEquals(List.of(), receiveUntilMarker(consumer, "before-commit", "uncommitted sends"));
        tx.commit();
        marker.send(plain.createTextMessage("after-commit"));
        assertEquals(List.of("tx-1", "tx-2"),
                receiveUntilMarker(consumer, "after-commit", "committed sends"));
    }

    @Test
    void receivesAreFinalOnlyAfterCommit() throws Exception {
        Connection c = connect();
        String name = unique("tx.receive");
        Session plain = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Queue queue = createdQueue(plain, name);
        MessageProducer producer = plain.createProducer(queue);
        producer.send(plain.createTextMessage("work"));

        Session tx = c.createSession(true, Session.SESSION_TRANSACTED);
        MessageConsumer txConsumer = tx.createConsumer(createdQueue(tx, name));
        Message first = receive(txConsumer, "first delivery");
        assertEquals("work", ((TextMessage) first).getText());
        assertFalse(first.getJMSRedelivered());
        tx.rollback();
        Message again = receive(txConsumer, "redelivery after rollback");
        assertEquals("work", ((TextMessage) again).getText());
        assertTrue(again.getJMSRedelivered(), "rolled-back receive must come back redelivered");
        tx.commit();
        txConsumer.close();
        tx.close();

        // Committed: gone for good, so the marker is the next thing on the queue.
        producer.send(plain.createTextMessage("marker"));
        MessageConsumer check = plain.createConsumer(queue);
        assertEquals(List.of(), receiveUntilMarker(check, "marker", "after the committed receive"));
    }
}
