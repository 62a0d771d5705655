package ferry.interop.jms2;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import jakarta.jms.BytesMessage;
import jakarta.jms.DeliveryMode;
import jakarta.jms.JMSConsumer;
import jakarta.jms.JMSContext;
import jakarta.jms.MapMessage;
import jakarta.jms.Message;
import jakarta.jms.Queue;
import jakarta.jms.TextMessage;

import org.junit.jupiter.api.Test;

/** Point to point with the JMS 2 simplified API: bodies, properties, priorities, expiry. */
class QueueTest extends Support {

    @Test
    void textMessagesKeepTheirHeadersAndProperties() throws Exception {
        String name = declareQueue("text");
        try (JMSContext ctx = context()) {
            Queue queue = ctx.createQueue(name);
            TextMessage sent = ctx.createTextMessage("hello");
            sent.setStringProperty("colour", "blue");
            sent.setIntProperty("count", 7);
            sent.setBooleanProperty("ok", true);
            sent.setJMSCorrelationID("corr-1");
            sent.setJMSType("greeting");
            ctx.createProducer().setPriority(7).send(queue, sent);
            Message got = ctx.createConsumer(queue).receive(TIMEOUT_MS);
            assertInstanceOf(TextMessage.class, got);
            assertEquals("hello", ((TextMessage) got).getText());
            assertEquals("blue", got.getStringProperty("colour"));
            assertEquals(7, got.getIntProperty("count"));
            assertTrue(got.getBooleanProperty("ok"));
            assertEquals("corr-1", got.getJMSCorrelationID());
            assertEquals("greeting", got.getJMSType());
            assertEquals(7, got.getJMSPriority());
            assertEquals(DeliveryMode.PERSISTENT, got.getJMSDeliveryMode());
            assertEquals(sent.getJMSMessageID(), got.getJMSMessageID());
            assertEquals(name, ((Queue) got.getJMSDestination()).getQueueName());
        }
    }

    @Test
    void bytesAndMapBodies() throws Exception {
        String name = declareQueue("bodies");
        try (JMSContext ctx = context()) {
            Queue queue = ctx.createQueue(name);
            byte[] bytes = new byte[200_000];
            for (int i = 0; i < bytes.length; i++) {
                bytes[i] = (byte) i;
            }
            ctx.createProducer().send(queue, bytes);
            ctx.createProducer().send(queue, Map.of("a", 1, "b", "two"));
            JMSConsumer consumer = ctx.createConsumer(queue);
            BytesMessage b = (BytesMessage) consumer.receive(TIMEOUT_MS);
            assertEquals(bytes.length, b.getBodyLength());
            byte[] back = b.getBody(byte[].class);
            assertTrue(java.util.Arrays.equals(bytes, back));
            MapMessage m = (MapMessage) consumer.receive(TIMEOUT_MS);
            assertEquals(1, m.getInt("a"));
            assertEquals("two", m.getString("b"));
        }
    }

    @Test
    void manyMessagesInOrder() throws Exception {
        String name = declareQueue("many");
        try (JMSContext ctx = context()) {
            Queue queue = ctx.createQueue(name);
            for (int i = 0; i < 2000; i++) {
                ctx.createProducer().setDeliveryMode(DeliveryMode.NON_PERSISTENT).send(queue, "m" + i);
            }
            JMSConsumer consumer = ctx.createConsumer(queue);
            for (int i = 0; i < 2000; i++) {
                assertEquals("m" + i, consumer.receiveBody(String.class, TIMEOUT_MS));
            }
            assertEquals(0, depth(name));
        }
    }

    @Test
    void expiredMessagesAreNotDelivered() throws Exception {
        String name = declareQueue("ttl");
        try (JMSContext ctx = context()) {
            Queue queue = ctx.createQueue(name);
            ctx.createProducer().setTimeToLive(50).send(queue, "brief");
            ctx.createProducer().send(queue, "lasting");
            Thread.sleep(200);
            assertEquals("lasting", ctx.createConsumer(queue).receiveBody(String.class, TIMEOUT_MS));
        }
    }

    @Test
    void clientAcknowledgeRedeliversWhatWasNotAcknowledged() throws Exception {
        String name = declareQueue("client-ack");
        try (JMSContext producer = context()) {
            producer.createProducer().send(producer.createQueue(name), "again");
        }
        try (JMSContext ctx = context(JMSContext.CLIENT_ACKNOWLEDGE)) {
            JMSConsumer consumer = ctx.createConsumer(ctx.createQueue(name));
            Message first = consumer.receive(TIMEOUT_MS);
            assertNotNull(first);
            ctx.recover();
            Message again = consumer.receive(TIMEOUT_MS);
            assertEquals("again", again.getBody(String.class));
            assertTrue(again.getJMSRedelivered());
            again.acknowledge();
        }
        assertEquals(0, depth(name));
    }

    @Test
    void receiveNoWaitDrainsCredit() throws Exception {
        String name = declareQueue("nowait");
        try (JMSContext ctx = context()) {
            JMSConsumer consumer = ctx.createConsumer(ctx.createQueue(name));
            assertNull(consumer.receiveNoWait());
            ctx.createProducer().send(ctx.createQueue(name), "now");
            Thread.sleep(200);
            List<String> got = new ArrayList<>();
            String body;
            while ((body = consumer.receiveBodyNoWait(String.class)) != null) {
                got.add(body);
            }
            assertEquals(List.of("now"), got);
        }
    }
}
