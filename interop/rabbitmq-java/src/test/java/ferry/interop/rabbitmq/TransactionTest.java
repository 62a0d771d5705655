package ferry.interop.rabbitmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;

import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.GetResponse;

import org.junit.jupiter.api.Test;

/** tx.select / tx.commit / tx.rollback with RabbitMQ's semantics. */
class TransactionTest extends RabbitSupport {

    @Test
    void publishesAreVisibleOnlyAfterCommit() throws Exception {
        Connection c = connect();
        Channel tx = c.createChannel();
        Channel observer = c.createChannel();
        String q = queue(tx, "tx-pub");
        tx.txSelect();
        publish(tx, "", q, "one");
        publish(tx, "", q, "two");
        assertEquals(0, observer.queueDeclarePassive(q).getMessageCount());
        tx.txCommit();
        assertEquals(2, observer.queueDeclarePassive(q).getMessageCount());
        publish(tx, "", q, "never");
        tx.txRollback();
        tx.txCommit();
        assertEquals("one", text(observer.basicGet(q, true).getBody()));
        assertEquals("two", text(observer.basicGet(q, true).getBody()));
        assertNull(observer.basicGet(q, true), "a rolled-back publish was delivered");
    }

    @Test
    void acksAreFinalOnlyAfterCommit() throws Exception {
        Connection c = connect();
        Channel setup = c.createChannel();
        String q = queue(setup, "tx-ack");
        publish(setup, "", q, "a");
        publish(setup, "", q, "b");

        Channel tx = connect().createChannel();
        tx.txSelect();
        GetResponse a = tx.basicGet(q, false);
        GetResponse b = tx.basicGet(q, false);
        assertNotNull(a);
        assertNotNull(b);
        tx.basicAck(b.getEnvelope().getDeliveryTag(), true);
        tx.txRollback();
        // Rolled back: both are still held, unacknowledged, by the transactional channel.
        assertEquals(0, setup.queueDeclarePassive(q).getMessageCount());
        tx.basicAck(a.getEnvelope().getDeliveryTag(), false);
        tx.txCommit();
        // Acknowledged but not committed when the channel closes: comes back.
        tx.basicAck(b.getEnvelope().getDeliveryTag(), false);
        tx.close();
        GetResponse again = setup.basicGet(q, true);
        assertNotNull(again, "the uncommitted ack was final");
        assertEquals("b", text(again.getBody()));
        assertTrue(again.getEnvelope().isRedeliver());
        assertNull(setup.basicGet(q, true), "the committed ack was not final");
    }

    @Test
    void confirmsAndTransactionsExcludeEachOther() throws Exception {
        Connection c = connect();
        Channel tx = c.createChannel();
        tx.txSelect();
        IOException e = assertThrows(IOException.class, tx::confirmSelect);
        assertEquals(406, channelCloseCode(e));
        Channel confirms = c.createChannel();
        confirms.confirmSelect();
        e = assertThrows(IOException.class, confirms::txSelect);
        assertEquals(406, channelCloseCode(e));
        assertConnectionUsable(c);
    }
}
