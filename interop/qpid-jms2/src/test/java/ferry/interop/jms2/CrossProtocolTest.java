package ferry.interop.jms2;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;

import java.nio.charset.StandardCharsets;
import java.util.Map;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.GetResponse;

import jakarta.jms.JMSContext;
import jakarta.jms.Message;
import jakarta.jms.TextMessage;

import org.junit.jupiter.api.Test;

/** JMS over 1.0 and the RabbitMQ Java client over 0-9-1 on one queue. */
class CrossProtocolTest extends Support {

    @Test
    void jmsToAmqp091() throws Exception {
        String name = declareQueue("to-091");
        try (JMSContext ctx = context()) {
            TextMessage m = ctx.createTextMessage("from JMS");
            m.setStringProperty("colour", "red");
            m.setJMSCorrelationID("c-1");
            ctx.createProducer().setPriority(6).send(ctx.createQueue(name), m);
        }
        try (com.rabbitmq.client.Connection c = amqp091()) {
            Channel ch = c.createChannel();
            GetResponse got = ch.basicGet(name, true);
            assertNotNull(got);
            assertEquals("from JMS", new String(got.getBody(), StandardCharsets.UTF_8));
            AMQP.BasicProperties p = got.getProps();
            assertEquals("red", p.getHeaders().get("colour").toString());
            assertEquals("c-1", p.getCorrelationId());
            assertEquals(6, p.getPriority());
            assertEquals(2, p.getDeliveryMode());
        }
    }

    @Test
    void amqp091ToJms() throws Exception {
        String name = declareQueue("from-091");
        try (com.rabbitmq.client.Connection c = amqp091()) {
            AMQP.BasicProperties props = new AMQP.BasicProperties.Builder()
                    .contentType("text/plain")
                    .correlationId("c-2")
                    .messageId("m-2")
                    .headers(Map.of("colour", "green"))
                    .deliveryMode(2)
                    .build();
            c.createChannel().basicPublish("", name, props, "from 0-9-1".getBytes(StandardCharsets.UTF_8));
        }
        try (JMSContext ctx = context()) {
            Message got = ctx.createConsumer(ctx.createQueue(name)).receive(TIMEOUT_MS);
            assertInstanceOf(TextMessage.class, got);
            assertEquals("from 0-9-1", ((TextMessage) got).getText());
            assertEquals("c-2", got.getJMSCorrelationID());
            assertEquals("green", got.getStringProperty("colour"));
        }
    }
}
