package ferry.interop.rabbitmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;

import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Delivery;
import com.rabbitmq.client.GetResponse;

import org.junit.jupiter.api.Test;

/** Dead-lettering (x-dead-letter-exchange) on reject and on per-queue TTL expiry. */
class DeadLetterTest extends RabbitSupport {

    @Test
    void rejectedMessageIsDeadLettered() throws Exception {
        Channel ch = connect().createChannel();
        String dlx = exchange(ch, "dlx", "fanout");
        String dead = queue(ch, "dead");
        ch.queueBind(dead, dlx, "");
        String q = queue(ch, "work", Map.of("x-dead-letter-exchange", dlx));
        Collector deadLetters = consume(ch, dead);

        publish(ch, "", q, "poison");
        publish(ch, "", q, "fine");
        Channel worker = connect().createChannel();
        Collector w = new Collector(worker);
        worker.basicConsume(q, false, w);
        Delivery poison = w.next("poison");
        Delivery fine = w.next("fine");
        worker.basicReject(poison.getEnvelope().getDeliveryTag(), false);
        worker.basicAck(fine.getEnvelope().getDeliveryTag(), false);

        Delivery d = deadLetters.next("dead-lettered message");
        assertEquals("poison", text(d));
        // The dead-lettered copy keeps its original routing key (no x-dead-letter-routing-key).
        assertEquals(q, d.getEnvelope().getRoutingKey());
        assertNull(deadLetters.poll(), "the acked message was dead-lettered too");
    }

    @Test
    void nackWithoutRequeueUsesDeadLetterRoutingKey() throws Exception {
        Channel ch = connect().createChannel();
        String dlx = exchange(ch, "dlx-direct", "direct");
        String dead = queue(ch, "dead");
        ch.queueBind(dead, dlx, "dead-key");
        String q = queue(ch, "work", Map.of("x-dead-letter-exchange", dlx,
                "x-dead-letter-routing-key", "dead-key"));
        publish(ch, "", q, "a");
        publish(ch, "", q, "b");
        GetResponse a = ch.basicGet(q, false);
        GetResponse b = ch.basicGet(q, false);
        assertNotNull(a);
        assertNotNull(b);
        ch.basicNack(b.getEnvelope().getDeliveryTag(), true, false); // both, no requeue

        Collector deadLetters = consume(ch, dead);
        Delivery d1 = deadLetters.next("first dead letter");
        Delivery d2 = deadLetters.next("second dead letter");
        assertEquals(List.of("a", "b"), List.of(text(d1), text(d2)));
        assertEquals("dead-key", d1.getEnvelope().getRoutingKey());
        assertEquals(0, ch.queueDeclarePassive(q).getMessageCount());
    }

    @Test
    void expiredMessagesAreDeadLettered() throws Exception {
        Channel ch = connect().createChannel();
        String dlx = exchange(ch, "dlx-ttl", "fanout");
        String dead = queue(ch, "expired");
        ch.queueBind(dead, dlx, "");
        String q = queue(ch, "ttl", Map.of("x-message-ttl", 200, "x-dead-letter-exchange", dlx));
        Collector deadLetters = consume(ch, dead);

        long start = System.nanoTime();
        publish(ch, "", q, "t1");
        publish(ch, "", q, "t2");
        Delivery d1 = deadLetters.next("expired t1 dead-lettered");
        Delivery d2 = deadLetters.next("expired t2 dead-lettered");
        long waitedMs = (System.nanoTime() - start) / 1_000_000;
        assertEquals(List.of("t1", "t2"), List.of(text(d1), text(d2)));
        assertTrue(waitedMs >= 150, "dead-lettered after " + waitedMs + " ms, before the 200 ms TTL");
        assertEquals(q, d1.getEnvelope().getRoutingKey());
        assertEquals(0, ch.queueDeclarePassive(q).getMessageCount());
    }

    @Test
    void queueTtlExpiresUnconsumedMessages() throws Exception {
        Channel ch = connect().createChannel();
        String q = queue(ch, "ttl-only", Map.of("x-message-ttl", 100));
        publish(ch, "", q, "old");
        long deadline = System.currentTimeMillis() + TIMEOUT_MS;
        int count;
        do {
            Thread.sleep(50);
            count = ch.queueDeclarePassive(q).getMessageCount();
        } while (count != 0 && System.currentTimeMillis() < deadline);
        assertEquals(0, count, "message still queued long after x-message-ttl 100 ms");
        assertNull(ch.basicGet(q, true));
        publish(ch, "", q, "fresh");
        GetResponse r = ch.basicGet(q, true);
        assertNotNull(r, "a fresh message expired at once");
        assertEquals("fresh", text(r.getBody()));
    }

    @Test
    void deadLetteredMessageCarriesXDeath() throws Exception {
        Channel ch = connect().createChannel();
        String dlx = exchange(ch, "dlx-xdeath", "fanout");
        String dead = queue(ch, "dead");
        ch.queueBind(dead, dlx, "");
        String q = queue(ch, "work", Map.of("x-dead-letter-exchange", dlx));
        publish(ch, "", q, "x");
        GetResponse r = ch.basicGet(q, false);
        assertNotNull(r);
        ch.basicReject(r.getEnvelope().getDeliveryTag(), false);
        Delivery d = consume(ch, dead).next("dead letter");
        Map<String, Object> headers = d.getProperties().getHeaders();
        assertNotNull(headers, "dead-lettered message has no headers (x-death expected)");
        Object xDeath = headers.get("x-death");
        assertTrue(xDeath instanceof List && !((List<?>) xDeath).isEmpty(), "x-death header: " + xDeath);
        @SuppressWarnings("unchecked")
        Map<String, Object> death = (Map<String, Object>) ((List<?>) xDeath).get(0);
        assertEquals(q, death.get("queue").toString());
        assertEquals("rejected", death.get("reason").toString());
        assertEquals(1L, ((Number) death.get("count")).longValue());
        assertEquals(q, headers.get("x-first-death-queue").toString());
        assertEquals("rejected", headers.get("x-first-death-reason").toString());
    }

    @Test
    void retryLoopCountsDeathsPerQueueAndReason() throws Exception {
        Channel ch = connect().createChannel();
        // work --reject--> (default exchange) retry --expire after 50 ms--> work
        String work = unique("work");
        String retry = queue(ch, "retry", Map.of("x-message-ttl", 50,
                "x-dead-letter-exchange", "", "x-dead-letter-routing-key", work));
        ch.queueDeclare(work, false, false, false, Map.of("x-dead-letter-exchange", "",
                "x-dead-letter-routing-key", retry));
        try {
            publish(ch, "", work, "job");
            Channel worker = connect().createChannel();
            Collector w = new Collector(worker);
            worker.basicConsume(work, false, w);
            Delivery d = null;
            for (int round = 1; round <= 3; round++) {
                d = w.next("delivery " + round);
                if (round < 3) {
                    worker.basicReject(d.getEnvelope().getDeliveryTag(), false);
                }
            }
            Map<String, Object> headers = d.getProperties().getHeaders();
            assertNotNull(headers, "no headers on the third delivery");
            @SuppressWarnings("unchecked")
            List<Map<String, Object>> deaths = (List<Map<String, Object>>) headers.get("x-death");
            assertEquals(2, deaths.size(), "one entry per queue and reason: " + deaths);
            assertEquals(retry, deaths.get(0).get("queue").toString());
            assertEquals("expired", deaths.get(0).get("reason").toString());
            assertEquals(2L, ((Number) deaths.get(0).get("count")).longValue());
            assertEquals(work, deaths.get(1).get("queue").toString());
            assertEquals("rejected", deaths.get(1).get("reason").toString());
            assertEquals(2L, ((Number) deaths.get(1).get("count")).longValue());
            assertTrue(deaths.get(1).get("time") instanceof java.util.Date, "time is a timestamp");
            assertEquals(List.of(work), ((List<?>) deaths.get(1).get("routing-keys")).stream()
                    .map(Object::toString).toList());
            assertEquals(work, headers.get("x-first-death-queue").toString());
            assertEquals("rejected", headers.get("x-first-death-reason").toString());
            worker.basicAck(d.getEnvelope().getDeliveryTag(), false);
        } finally {
            ch.queueDelete(work);
        }
    }
}
