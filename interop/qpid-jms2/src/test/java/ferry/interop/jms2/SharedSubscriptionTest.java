package ferry.interop.jms2;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;

import jakarta.jms.InvalidDestinationRuntimeException;
import jakarta.jms.JMSConsumer;
import jakarta.jms.JMSContext;
import jakarta.jms.JMSRuntimeException;
import jakarta.jms.Topic;

import org.junit.jupiter.api.Test;

/**
 * JMS 2 shared subscriptions: consumers of one subscription name split its messages, across
 * connections; a durable one keeps what its topic gets while none is attached, until it is
 * unsubscribed; a non-durable one lasts while it has consumers.
 */
class SharedSubscriptionTest extends Support {

    /** Receives until `count` bodies have come from the consumers together. */
    private static List<String> receiveFrom(int count, JMSConsumer... consumers) {
        List<String> got = new ArrayList<>();
        long deadline = System.currentTimeMillis() + TIMEOUT_MS;
        while (got.size() < count && System.currentTimeMillis() < deadline) {
            for (JMSConsumer c : consumers) {
                String body = c.receiveBody(String.class, 50);
                if (body != null) {
                    got.add(body);
                }
            }
        }
        return got;
    }

    @Test
    void sharedDurableConsumersSplitOneSubscriptionThatOutlivesThem() throws Exception {
        String clientId = unique("client");
        String subscription = unique("shared");
        String address = "amq.topic/" + unique("news");
        try (JMSContext a = factory("&jms.clientID=" + clientId).createContext();
             JMSContext b = factory("").createContext()) {
            // A client id belongs to one connection at a time: the second consumer is on
            // another session of it (the global test below shares across connections).
            Topic topic = a.createTopic(address);
            JMSConsumer first = a.createSharedDurableConsumer(topic, subscription);
            JMSContext a2 = a.createContext(JMSContext.AUTO_ACKNOWLEDGE);
            JMSConsumer second = a2.createSharedDurableConsumer(topic, subscription);
            for (int i = 0; i < 10; i++) {
                b.createProducer().send(b.createTopic(address), "m" + i);
            }
            List<String> got = receiveFrom(10, first, second);
            assertEquals(10, got.size(), "each message once: " + got);
            assertEquals(10, got.stream().distinct().count(), "no duplicates: " + got);
            first.close();
            second.close();
            a2.close();
            // Nobody attached: the subscription keeps what comes.
            b.createProducer().send(b.createTopic(address), "while away");
            JMSConsumer back = a.createSharedDurableConsumer(topic, subscription);
            assertEquals("while away", back.receiveBody(String.class, TIMEOUT_MS));
            // In use (Qpid JMS refuses this one itself; the global test below has the broker
            // refuse it).
            assertThrows(JMSRuntimeException.class, () -> a.unsubscribe(subscription),
                    "in use");
            back.close();
            a.unsubscribe(subscription);
            assertThrows(InvalidDestinationRuntimeException.class,
                    () -> a.unsubscribe(subscription), "already unsubscribed");
        }
    }

    @Test
    void aGlobalSharedDurableSubscriptionNeedsNoClientId() throws Exception {
        String subscription = unique("global");
        String address = "amq.topic/" + unique("news");
        try (JMSContext a = context(); JMSContext b = context(); JMSContext c = context()) {
            Topic topic = a.createTopic(address);
            JMSConsumer onA = a.createSharedDurableConsumer(topic, subscription);
            JMSConsumer onB = b.createSharedDurableConsumer(b.createTopic(address), subscription);
            for (int i = 0; i < 10; i++) {
                a.createProducer().send(topic, "g" + i);
            }
            List<String> got = receiveFrom(10, onA, onB);
            assertEquals(10, got.size(), "one subscription across connections: " + got);
            // A connection with no consumer of it asks the broker, which refuses: in use.
            assertThrows(JMSRuntimeException.class, () -> c.unsubscribe(subscription));
            onA.close();
            onB.close();
            a.unsubscribe(subscription);
        }
    }

    @Test
    void aSharedNonDurableSubscriptionLastsWhileItHasConsumers() throws Exception {
        String subscription = unique("volatile");
        String address = "amq.topic/" + unique("news");
        try (JMSContext a = context(); JMSContext b = context()) {
            Topic topic = a.createTopic(address);
            JMSConsumer onA = a.createSharedConsumer(topic, subscription);
            JMSConsumer onB = b.createSharedConsumer(b.createTopic(address), subscription);
            for (int i = 0; i < 10; i++) {
                a.createProducer().send(topic, "v" + i);
            }
            List<String> got = receiveFrom(10, onA, onB);
            assertEquals(10, got.size(), "split between them: " + got);
            onA.close();
            a.createProducer().send(topic, "to the one left");
            assertEquals("to the one left", onB.receiveBody(String.class, TIMEOUT_MS));
            onB.close();
            // Gone with its last consumer: a new one starts empty.
            a.createProducer().send(topic, "nobody subscribed");
            JMSConsumer again = a.createSharedConsumer(topic, subscription);
            assertNull(again.receiveBody(String.class, 300));
            a.createProducer().send(topic, "new");
            assertEquals("new", again.receiveBody(String.class, TIMEOUT_MS));
        }
    }

    @Test
    void sharedConsumersWithASelectorGetOnlyItsMatches() throws Exception {
        String subscription = unique("selective");
        String address = "amq.topic/" + unique("news");
        try (JMSContext a = context()) {
            Topic topic = a.createTopic(address);
            JMSConsumer c1 = a.createSharedConsumer(topic, subscription, "colour = 'red'");
            JMSConsumer c2 = a.createSharedConsumer(topic, subscription, "colour = 'red'");
            for (String colour : new String[] {"red", "blue", "red"}) {
                a.createProducer().setProperty("colour", colour).send(topic, colour);
            }
            List<String> got = receiveFrom(2, c1, c2);
            assertEquals(List.of("red", "red"), got);
            assertNull(c1.receiveBody(String.class, 300));
            assertTrue(got.stream().allMatch("red"::equals));
        }
    }

    /**
     * JMS: a shared and an unshared durable subscription may not have the same name and
     * client id. The one made first stays, consumed or not, and keeps what it collected.
     */
    @Test
    void aDurableSubscriptionIsTakenUpOnlyAsTheKindItWasMade() {
        String clientId = unique("client");
        String address = "amq.topic/" + unique("news");
        String unshared = unique("solo");
        String shared = unique("group");
        try (JMSContext ctx = factory("&jms.clientID=" + clientId).createContext()) {
            Topic topic = ctx.createTopic(address);
            ctx.createDurableConsumer(topic, unshared).close();
            ctx.createSharedDurableConsumer(topic, shared).close();
            ctx.createProducer().send(topic, "kept");
            assertThrows(JMSRuntimeException.class,
                    () -> ctx.createSharedDurableConsumer(topic, unshared));
            assertThrows(JMSRuntimeException.class,
                    () -> ctx.createDurableConsumer(topic, shared));
            JMSConsumer solo = ctx.createDurableConsumer(topic, unshared);
            assertEquals("kept", solo.receiveBody(String.class, TIMEOUT_MS));
            solo.close();
            JMSConsumer group = ctx.createSharedDurableConsumer(topic, shared);
            assertEquals("kept", group.receiveBody(String.class, TIMEOUT_MS));
            group.close();
            ctx.unsubscribe(unshared);
            ctx.unsubscribe(shared);
        }
    }
}
