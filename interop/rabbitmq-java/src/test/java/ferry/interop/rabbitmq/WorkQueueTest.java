package ferry.interop.rabbitmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;

import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.Delivery;

import org.junit.jupiter.api.Test;

/** Work queues: basic.qos prefetch, manual ack, redelivery of unacked messages. */
class WorkQueueTest extends RabbitSupport {

    @Test
    void prefetchBoundsUnackedDeliveries() throws Exception {
        Connection c = connect();
        Channel ch = c.createChannel();
        String q = queue(ch, "work");
        for (int i = 0; i < 10; i++) {
            publish(ch, "", q, "task-" + i);
        }

        Channel worker = c.createChannel();
        worker.basicQos(2);
        Collector w = new Collector(worker);
        worker.basicConsume(q, false, w);

        Delivery first = w.next("first of two prefetched");
        Delivery second = w.next("second of two prefetched");
        assertEquals("task-0", text(first));
        assertEquals("task-1", text(second));
        assertNull(w.poll(), "a third delivery arrived with prefetch 2 and nothing acked");
        // queue.declare-ok counts ready messages only (as RabbitMQ does).
        assertEquals(8, ch.queueDeclarePassive(q).getMessageCount(), "ready messages");

        worker.basicAck(first.getEnvelope().getDeliveryTag(), false);
        Delivery third = w.next("delivery after one ack");
        assertEquals("task-2", text(third));
        assertNull(w.poll(), "acking one message let more than one more through");

        // multiple=true settles task-1 and task-2 at once and reopens the whole window.
        worker.basicAck(third.getEnvelope().getDeliveryTag(), true);
        List<String> rest = new ArrayList<>();
        while (rest.size() < 7) {
            Delivery d = w.next("rest of the queue (got " + rest + ")");
            rest.add(text(d));
            worker.basicAck(d.getEnvelope().getDeliveryTag(), false);
        }
        assertEquals(List.of("task-3", "task-4", "task-5", "task-6", "task-7", "task-8", "task-9"), rest);
        assertEquals(0, ch.queueDeclarePassive(q).getMessageCount());
    }

    @Test
    void unackedMessagesAreRedeliveredAfterChannelClose() throws Exception {
        Connection c = connect();
        Channel ch = c.createChannel();
        String q = queue(ch, "redeliver");
        for (String s : List.of("a", "b", "c")) {
            publish(ch, "", q, s);
        }

        Channel first = c.createChannel();
        first.basicQos(10);
        Collector f = new Collector(first);
        first.basicConsume(q, false, f);
        Delivery a = f.next("a");
        f.next("b");
        f.next("c");
        assertFalse(a.getEnvelope().isRedeliver());
        first.basicAck(a.getEnvelope().getDeliveryTag(), false);
        first.close(); // b and c were never acked

        Channel second = connect().createChannel();
        Collector s = new Collector(second);
        second.basicConsume(q, false, s);
        Delivery b = s.next("redelivered b");
        Delivery cc = s.next("redelivered c");
        assertEquals("b", text(b));
        assertEquals("c", text(cc));
        assertTrue(b.getEnvelope().isRedeliver(), "b not flagged redelivered");
        assertTrue(cc.getEnvelope().isRedeliver(), "c not flagged redelivered");
        second.basicAck(cc.getEnvelope().getDeliveryTag(), true);
        assertNull(s.poll(), "the acked message a came back");
    }

    @Test
    void prefetchOneSharesWorkBetweenTwoWorkers() throws Exception {
        Connection c = connect();
        Channel ch = c.createChannel();
        String q = queue(ch, "fair");

        Channel ch1 = c.createChannel();
        Channel ch2 = connect().createChannel();
        ch1.basicQos(1);
        ch2.basicQos(1);
        Collector w1 = new Collector(ch1);
        Collector w2 = new Collector(ch2);
        ch1.basicConsume(q, false, w1);
        ch2.basicConsume(q, false, w2);

        publish(ch, "", q, "job-1");
        publish(ch, "", q, "job-2");
        // Each worker holds one unacked message, so the second job must go to the other.
        Delivery d1 = w1.next("worker 1's job");
        Delivery d2 = w2.next("worker 2's job");
        assertEquals(java.util.Set.of("job-1", "job-2"), java.util.Set.of(text(d1), text(d2)));

        publish(ch, "", q, "job-3");
        assertNull(w1.poll(), "worker 1 got a second job with prefetch 1");
        assertTrue(w2.deliveries.isEmpty(), "worker 2 got a second job with prefetch 1");
        ch2.basicAck(d2.getEnvelope().getDeliveryTag(), false);
        assertEquals("job-3", text(w2.next("job-3 after worker 2 acked")));
        assertTrue(w1.deliveries.isEmpty());
    }

    @Test
    void nackWithRequeuePutsTheMessageBack() throws Exception {
        Channel ch = connect().createChannel();
        String q = queue(ch, "nack");
        publish(ch, "", q, "again");
        Collector w = new Collector(ch);
        ch.basicQos(1);
        ch.basicConsume(q, false, w);
        Delivery d = w.next("first delivery");
        assertFalse(d.getEnvelope().isRedeliver());
        ch.basicNack(d.getEnvelope().getDeliveryTag(), false, true);
        Delivery again = w.next("requeued delivery");
        assertEquals("again", text(again));
        assertTrue(again.getEnvelope().isRedeliver());
        ch.basicAck(again.getEnvelope().getDeliveryTag(), false);
    }
}
