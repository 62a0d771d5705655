package ferry.interop.jms2;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import jakarta.jms.Connection;
import jakarta.jms.InvalidDestinationException;
import jakarta.jms.InvalidDestinationRuntimeException;
import jakarta.jms.JMSConsumer;
import jakarta.jms.JMSContext;
import jakarta.jms.Session;
import jakarta.jms.TextMessage;
import jakarta.jms.Topic;
import jakarta.jms.TopicSubscriber;

import org.junit.jupiter.api.Test;

/**
 * JMS durable subscriptions: a subscription (named by the client id and the subscription
 * name) keeps what its topic gets while no consumer is attached, across connections, until
 * it is unsubscribed.
 */
class DurableSubscriptionTest extends Support {

    private JMSContext contextFor(String clientId) {
        JMSContext ctx = factory("&jms.clientID=" + clientId).createContext();
        return ctx;
    }

    @Test
    void aDurableConsumerGetsWhatWasPublishedWhileAwayUntilUnsubscribed() throws Exception {
        String clientId = unique("client");
        String subscription = unique("sub");
        String address = "amq.topic/" + unique("news");
        try (JMSContext ctx = contextFor(clientId)) {
            Topic topic = ctx.createTopic(address);
            JMSConsumer consumer = ctx.createDurableConsumer(topic, subscription);
            ctx.createProducer().send(topic, "first");
            assertEquals("first", consumer.receiveBody(String.class, TIMEOUT_MS));
            consumer.close();
            ctx.createProducer().send(topic, "while away");
        }
        try (JMSContext ctx = contextFor(clientId)) {
            Topic topic = ctx.createTopic(address);
            ctx.createProducer().send(topic, "while the connection was new");
            JMSConsumer consumer = ctx.createDurableConsumer(topic, subscription);
            assertEquals("while away", consumer.receiveBody(String.class, TIMEOUT_MS));
            assertEquals("while the connection was new",
                    consumer.receiveBody(String.class, TIMEOUT_MS));
            consumer.close();
            ctx.unsubscribe(subscription);
            ctx.createProducer().send(topic, "after unsubscribe");
            assertThrows(InvalidDestinationRuntimeException.class,
                    () -> ctx.unsubscribe(subscription), "already unsubscribed");
            // Subscribing again starts a new subscription: nothing from before it.
            JMSConsumer fresh = ctx.createDurableConsumer(topic, subscription);
            assertNull(fresh.receiveBody(String.class, 300));
            ctx.createProducer().send(topic, "new");
            assertEquals("new", fresh.receiveBody(String.class, TIMEOUT_MS));
            fresh.close();
            ctx.unsubscribe(subscription);
        }
    }

    @Test
    void theJms11DurableSubscriberAndAnotherTopicReplacingTheSubscription() throws Exception {
        String clientId = unique("client");
        String subscription = unique("sub");
        Connection c = factory("&jms.clientID=" + clientId).createConnection();
        try {
            c.start();
            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Topic news = s.createTopic("amq.topic/" + unique("news"));
            Topic sport = s.createTopic("amq.topic/" + unique("sport"));
            TopicSubscriber subscriber = s.createDurableSubscriber(news, subscription);
            subscriber.close();
            s.createProducer(news).send(s.createTextMessage("news while away"));
            // The same subscription name on another topic: a new subscription.
            TopicSubscriber onSport = s.createDurableSubscriber(sport, subscription);
            s.createProducer(sport).send(s.createTextMessage("sport"));
            assertEquals("sport", ((TextMessage) onSport.receive(TIMEOUT_MS)).getText());
            assertNull(onSport.receive(300), "the news subscription went with its backlog");
            onSport.close();
            s.unsubscribe(subscription);
            assertThrows(InvalidDestinationException.class, () -> s.unsubscribe(subscription));
        } finally {
            c.close();
        }
    }
}
