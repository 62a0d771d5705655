package ferry.interop.rabbitmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentSkipListSet;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import com.rabbitmq.client.Channel;
import com.rabbitmq.client.ConfirmListener;

import org.junit.jupiter.api.Test;

/** Publisher confirms (confirm.select, basic.ack / basic.nack from the broker). */
class ConfirmsTest extends RabbitSupport {

    @Test
    void waitForConfirmsOrDieAfterManyPublishes() throws Exception {
        Channel ch = connect().createChannel();
        String q = queue(ch, "confirm");
        ch.confirmSelect();
        for (int i = 0; i < 200; i++) {
            publish(ch, "", q, "m" + i);
        }
        ch.waitForConfirmsOrDie(TIMEOUT_MS);
        // Confirmed means enqueued.
        assertEquals(200, ch.queueDeclarePassive(q).getMessageCount());
        // A publish that routes nowhere is still confirmed (ack, not nack).
        publish(ch, "", unique("nowhere"), "dropped");
        ch.waitForConfirmsOrDie(TIMEOUT_MS);
    }

    @Test
    void confirmListenerSeesEverySequenceNumber() throws Exception {
        Channel ch = connect().createChannel();
        String q = queue(ch, "confirm-async");
        ch.confirmSelect();
        int n = 100;
        Set<Long> acked = new ConcurrentSkipListSet<>();
        Set<Long> nacked = new ConcurrentSkipListSet<>();
        CountDownLatch all = new CountDownLatch(n);
        long first = ch.getNextPublishSeqNo();
        assertEquals(1, first, "first publish sequence number");
        ch.addConfirmListener(new ConfirmListener() {
            @Override
            public void handleAck(long tag, boolean multiple) {
                record(acked, tag, multiple);
            }

            @Override
            public void handleNack(long tag, boolean multiple) {
                record(nacked, tag, multiple);
            }

            private void record(Set<Long> into, long tag, boolean multiple) {
                long from = multiple ? 1 : tag;
                for (long t = from; t <= tag; t++) {
                    if (!acked.contains(t) && !nacked.contains(t)) {
                        into.add(t);
                        all.countDown();
                    }
                }
            }
        });
        for (int i = 0; i < n; i++) {
            publish(ch, "", q, "m" + i);
        }
        assertTrue(all.await(TIMEOUT_MS, TimeUnit.MILLISECONDS),
                "confirms for " + (n - all.getCount()) + " of " + n + " publishes");
        assertEquals(n, acked.size());
        assertTrue(nacked.isEmpty(), "nacked: " + nacked);
    }

    @Test
    void rejectPublishOverflowIsNacked() throws Exception {
        Channel ch = connect().createChannel();
        String q = queue(ch, "overflow", Map.of("x-max-length", 1, "x-overflow", "reject-publish"));
        ch.confirmSelect();
        publish(ch, "", q, "fits");
        ch.waitForConfirmsOrDie(TIMEOUT_MS);
        publish(ch, "", q, "refused");
        assertThrows(IOException.class, () -> ch.waitForConfirmsOrDie(TIMEOUT_MS),
                "publish beyond x-max-length with reject-publish was not nacked");
    }
}
