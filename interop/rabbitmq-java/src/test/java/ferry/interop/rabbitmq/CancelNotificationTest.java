package ferry.interop.rabbitmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.TimeUnit;

import com.rabbitmq.client.Channel;

import org.junit.jupiter.api.Test;

/** The broker cancels consumers of a deleted queue (consumer_cancel_notify). */
class CancelNotificationTest extends RabbitSupport {

    @Test
    void deletingTheQueueCancelsItsConsumer() throws Exception {
        Channel consumerCh = connect().createChannel();
        String q = queue(consumerCh, "doomed");
        Collector c = new Collector(consumerCh);
        String tag = consumerCh.basicConsume(q, true, c);
        publish(consumerCh, "", q, "before");
        assertEquals("before", text(c.next("message before the delete")));

        Channel admin = connect().createChannel();
        admin.queueDelete(q);
        assertTrue(c.cancelled.await(TIMEOUT_MS, TimeUnit.MILLISECONDS),
                "handleCancel not called within " + TIMEOUT_MS + " ms after queue.delete");
        assertEquals(tag, c.cancelledTag.get());

        // The channel survives the cancel and can consume elsewhere.
        assertTrue(consumerCh.isOpen());
        String q2 = queue(consumerCh, "next");
        Collector c2 = consume(consumerCh, q2);
        publish(admin, "", q2, "after");
        assertEquals("after", text(c2.next("message on the new queue")));
    }

    @Test
    void clientCancelIsConfirmedAndStopsDeliveries() throws Exception {
        Channel ch = connect().createChannel();
        String q = queue(ch, "cancel");
        Collector c = new Collector(ch);
        String tag = ch.basicConsume(q, true, c);
        ch.basicCancel(tag); // waits for cancel-ok
        publish(ch, "", q, "unseen");
        assertEquals(1, ch.queueDeclarePassive(q).getMessageCount());
        assertTrue(c.deliveries.isEmpty(), "delivered to a cancelled consumer");
        assertEquals(1, c.cancelled.getCount(), "client-side cancel reported as a server cancel");
    }
}
