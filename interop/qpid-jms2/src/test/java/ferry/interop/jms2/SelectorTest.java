package ferry.interop.jms2;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import jakarta.jms.DeliveryMode;
import jakarta.jms.JMSConsumer;
import jakarta.jms.JMSContext;
import jakarta.jms.JMSProducer;
import jakarta.jms.Queue;
import jakarta.jms.QueueBrowser;
import jakarta.jms.Topic;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

import org.junit.jupiter.api.Test;

/**
 * JMS message selectors, applied by the broker: a consumer gets only what its selector
 * matches, and what it does not match stays queued for others (on a queue) or is never
 * its (on a topic subscription).
 */
class SelectorTest extends Support {

    private static void send(JMSContext ctx, jakarta.jms.Destination to, String body,
            String colour, int weight) {
        ctx.createProducer()
                .setProperty("colour", colour)
                .setProperty("weight", weight)
                .send(to, body);
    }

    private static List<String> drain(JMSConsumer consumer, long waitMs) {
        List<String> got = new ArrayList<>();
        String body;
        while ((body = consumer.receiveBody(String.class, waitMs)) != null) {
            got.add(body);
        }
        return got;
    }

    @Test
    void aQueueConsumerGetsOnlyItsMatchesAndLeavesTheRest() throws Exception {
        Queue queue;
        try (JMSContext ctx = context()) {
            queue = ctx.createQueue(declareQueue("selector"));
            send(ctx, queue, "red light", "red", 10);
            send(ctx, queue, "blue heavy", "blue", 3000);
            send(ctx, queue, "red heavy", "red", 2600);
            send(ctx, queue, "green", "green", 1);
            JMSConsumer heavyRed = ctx.createConsumer(queue, "colour = 'red' AND weight > 2500");
            assertEquals(List.of("red heavy"), drain(heavyRed, 500));
            heavyRed.close();
            JMSConsumer notRed = ctx.createConsumer(queue,
                    "colour IN ('blue', 'green') OR weight BETWEEN 0 AND 5");
            assertEquals(List.of("blue heavy", "green"), drain(notRed, 500));
            notRed.close();
            JMSConsumer everything = ctx.createConsumer(queue);
            assertEquals(List.of("red light"), drain(everything, 500));
        }
    }

    @Test
    void headerFieldsSelectByJmsNames() throws Exception {
        try (JMSContext ctx = context()) {
            Queue queue = ctx.createQueue(declareQueue("selector-headers"));
            JMSProducer producer = ctx.createProducer();
            producer.setJMSType("car").setPriority(7).setDeliveryMode(DeliveryMode.PERSISTENT)
                    .setJMSCorrelationID("order-1").send(queue, "car");
            producer.setJMSType("bike").setPriority(2)
                    .setDeliveryMode(DeliveryMode.NON_PERSISTENT)
                    .setJMSCorrelationID("order-2").send(queue, "bike");
            JMSConsumer cars = ctx.createConsumer(queue,
                    "JMSType = 'car' AND JMSPriority > 5 AND JMSDeliveryMode = 'PERSISTENT'");
            assertEquals(List.of("car"), drain(cars, 500));
            cars.close();
            JMSConsumer second = ctx.createConsumer(queue,
                    "JMSCorrelationID LIKE 'order-_' AND JMSTimestamp > 0");
            assertEquals(List.of("bike"), drain(second, 500));
        }
    }

    @Test
    void competingConsumersWithSelectorsSplitAQueue() throws Exception {
        try (JMSContext ctx = context()) {
            Queue queue = ctx.createQueue(declareQueue("selector-split"));
            JMSConsumer red = ctx.createConsumer(queue, "colour = 'red'");
            JMSConsumer blue = ctx.createConsumer(queue, "colour = 'blue'");
            for (int i = 0; i < 20; i++) {
                send(ctx, queue, (i % 2 == 0 ? "red " : "blue ") + i, i % 2 == 0 ? "red" : "blue", i);
            }
            List<String> reds = drain(red, 500);
            List<String> blues = drain(blue, 500);
            assertEquals(10, reds.size());
            assertEquals(10, blues.size());
            reds.forEach(b -> assertEquals("red", b.split(" ")[0]));
            blues.forEach(b -> assertEquals("blue", b.split(" ")[0]));
        }
    }

    @Test
    void aBrowserWithASelectorSeesOnlyItsMatches() throws Exception {
        try (JMSContext ctx = context()) {
            Queue queue = ctx.createQueue(declareQueue("selector-browse"));
            send(ctx, queue, "a", "red", 1);
            send(ctx, queue, "b", "blue", 2);
            send(ctx, queue, "c", "red", 3);
            QueueBrowser browser = ctx.createBrowser(queue, "colour = 'red'");
            List<String> seen = new ArrayList<>();
            for (Object m : Collections.list(browser.getEnumeration())) {
                seen.add(((jakarta.jms.TextMessage) m).getText());
            }
            assertEquals(List.of("a", "c"), seen);
            assertEquals(List.of("a", "b", "c"), drain(ctx.createConsumer(queue), 500));
        }
    }

    @Test
    void topicSubscribersGetOnlyTheirMatchesDurableOrNot() throws Exception {
        String clientId = unique("client");
        String subscription = unique("sub");
        try (JMSContext ctx = factory("&jms.clientID=" + clientId).createContext()) {
            Topic topic = ctx.createTopic("amq.topic/" + unique("prices"));
            JMSConsumer cheap = ctx.createConsumer(topic, "weight < 100");
            JMSConsumer durable = ctx.createDurableConsumer(topic, subscription,
                    "colour = 'red'", false);
            send(ctx, topic, "red 5", "red", 5);
            send(ctx, topic, "blue 500", "blue", 500);
            send(ctx, topic, "red 500", "red", 500);
            assertEquals(List.of("red 5"), drain(cheap, 500));
            assertEquals(List.of("red 5", "red 500"), drain(durable, 500));
            durable.close();
            send(ctx, topic, "blue while away", "blue", 1);
            send(ctx, topic, "red while away", "red", 1);
            // Resumed with the same selector: what it matched while away, nothing else.
            durable = ctx.createDurableConsumer(topic, subscription, "colour = 'red'", false);
            assertEquals(List.of("red while away"), drain(durable, 500));
            durable.close();
            send(ctx, topic, "red before the change", "red", 1);
            // Another selector is another subscription: it starts empty.
            durable = ctx.createDurableConsumer(topic, subscription, "colour = 'blue'", false);
            assertNull(durable.receiveBody(String.class, 300));
            send(ctx, topic, "blue after", "blue", 1);
            assertEquals(List.of("blue after"), drain(durable, 500));
            durable.close();
            ctx.unsubscribe(subscription);
        }
    }
}
