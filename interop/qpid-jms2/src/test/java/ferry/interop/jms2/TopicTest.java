package ferry.interop.jms2;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import jakarta.jms.JMSConsumer;
import jakarta.jms.JMSContext;
import jakarta.jms.Topic;

import org.junit.jupiter.api.Test;

/** Topics: ferryd's exchanges, with the key after a slash (or amq.topic for a plain name). */
class TopicTest extends Support {

    @Test
    void everySubscriberOfATopicGetsACopy() throws Exception {
        String key = unique("news");
        try (JMSContext ctx = context()) {
            Topic topic = ctx.createTopic("amq.topic/" + key);
            JMSConsumer a = ctx.createConsumer(topic);
            JMSConsumer b = ctx.createConsumer(topic);
            ctx.createProducer().send(topic, "extra!");
            assertEquals("extra!", a.receiveBody(String.class, TIMEOUT_MS));
            assertEquals("extra!", b.receiveBody(String.class, TIMEOUT_MS));
        }
    }

    @Test
    void wildcardSubscriptionsOnTheTopicExchange() throws Exception {
        String root = unique("sport");
        try (JMSContext ctx = context()) {
            JMSConsumer all = ctx.createConsumer(ctx.createTopic("amq.topic/" + root + ".#"));
            ctx.createProducer().send(ctx.createTopic("amq.topic/" + root + ".tennis"), "t");
            ctx.createProducer().send(ctx.createTopic("amq.topic/other." + root), "o");
            ctx.createProducer().send(ctx.createTopic("amq.topic/" + root + ".golf"), "g");
            assertEquals("t", all.receiveBody(String.class, TIMEOUT_MS));
            assertEquals("g", all.receiveBody(String.class, TIMEOUT_MS));
            assertNull(all.receiveBody(String.class, 300));
        }
    }

    @Test
    void aPlainTopicNameIsAKeyOfAmqTopic() throws Exception {
        String name = unique("plain");
        try (JMSContext ctx = context()) {
            Topic topic = ctx.createTopic(name);
            JMSConsumer consumer = ctx.createConsumer(topic);
            ctx.createProducer().send(topic, "via amq.topic");
            assertEquals("via amq.topic", consumer.receiveBody(String.class, TIMEOUT_MS));
        }
    }

    @Test
    void fanoutExchangesAsTopics() throws Exception {
        try (JMSContext ctx = context()) {
            Topic topic = ctx.createTopic("amq.fanout");
            JMSConsumer consumer = ctx.createConsumer(topic);
            ctx.createProducer().send(topic, "to all");
            assertEquals("to all", consumer.receiveBody(String.class, TIMEOUT_MS));
        }
    }
}
