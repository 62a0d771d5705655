package ferry.interop.rabbitmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.GetResponse;

import org.junit.jupiter.api.Test;

/** basic.get: empty queue, message count, properties, ack and requeue. */
class BasicGetTest extends RabbitSupport {

    @Test
    void basicGetReturnsMessagesWithPropertiesAndCount() throws Exception {
        Channel ch = connect().createChannel();
        String q = queue(ch, "get");
        assertNull(ch.basicGet(q, true), "basic.get on an empty queue must answer get-empty");

        AMQP.BasicProperties props = new AMQP.BasicProperties.Builder()
                .contentType("application/json").contentEncoding("utf-8")
                .headers(Map.of("k", "v", "n", 7))
                .deliveryMode(2).priority(3).correlationId("corr").replyTo("back")
                .messageId("id-1").type("kind").appId("ferry-test").timestamp(new java.util.Date(1_700_000_000_000L))
                .build();
        ch.basicPublish("", q, props, bytes("{\"a\":1}"));
        publish(ch, "", q, "second");

        GetResponse r = ch.basicGet(q, false);
        assertNotNull(r, "basic.get found nothing");
        assertEquals("{\"a\":1}", text(r.getBody()));
        assertEquals(1, r.getMessageCount(), "messages left after the get");
        assertFalse(r.getEnvelope().isRedeliver());
        assertEquals("", r.getEnvelope().getExchange());
        assertEquals(q, r.getEnvelope().getRoutingKey());
        AMQP.BasicProperties p = r.getProps();
        assertEquals("application/json", p.getContentType());
        assertEquals("utf-8", p.getContentEncoding());
        assertEquals("v", p.getHeaders().get("k").toString());
        assertEquals(7, p.getHeaders().get("n"));
        assertEquals(2, p.getDeliveryMode());
        assertEquals(3, p.getPriority());
        assertEquals("corr", p.getCorrelationId());
        assertEquals("back", p.getReplyTo());
        assertEquals("id-1", p.getMessageId());
        assertEquals("kind", p.getType());
        assertEquals("ferry-test", p.getAppId());
        assertEquals(1_700_000_000_000L, p.getTimestamp().getTime());

        // Requeue it: the next get sees it again, flagged redelivered, ahead of "second".
        ch.basicReject(r.getEnvelope().getDeliveryTag(), true);
        GetResponse again = ch.basicGet(q, false);
        assertNotNull(again);
        assertEquals("{\"a\":1}", text(again.getBody()));
        assertTrue(again.getEnvelope().isRedeliver());
        ch.basicAck(again.getEnvelope().getDeliveryTag(), false);

        GetResponse second = ch.basicGet(q, true);
        assertNotNull(second);
        assertEquals("second", text(second.getBody()));
        assertEquals(0, second.getMessageCount());
        assertNull(ch.basicGet(q, true));
    }
}
