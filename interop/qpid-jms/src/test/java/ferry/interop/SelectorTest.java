package ferry.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;

import javax.jms.Connection;
import javax.jms.Destination;
import javax.jms.MessageConsumer;
import javax.jms.MessageProducer;
import javax.jms.Queue;
import javax.jms.Session;
import javax.jms.TextMessage;
import javax.jms.Topic;
import javax.jms.TopicSubscriber;

import org.junit.jupiter.api.Test;

/**
 * JMS selectors over 0-10. ferryd announces {@code qpid.jms-selector}, so the client
 * subscribes pre-acquired with {@code x-filter-jms-selector} and leaves the filtering to
 * the broker: a selective consumer is given only its matches, and the rest stay queued.
 */
class SelectorTest extends InteropSupport {

    private static void send(Session s, Destination to, String text, String colour)
            throws Exception {
        MessageProducer producer = s.createProducer(to);
        TextMessage m = s.createTextMessage(text);
        if (colour != null) {
            m.setStringProperty("colour", colour);
        }
        m.setIntProperty("weight", text.length());
        producer.send(m);
        producer.close();
    }

    @Test
    void aSelectiveConsumerGetsItsMatchesAndTheRestStayQueued() throws Exception {
        Connection c = connect();
        Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Queue queue = createdQueue(s, unique("selector"));
        send(s, queue, "red 1", "red");
        send(s, queue, "blue 1", "blue");
        send(s, queue, "red 2", "red");
        send(s, queue, "none", null);
        send(s, queue, "red end", "red");
        MessageConsumer reds = s.createConsumer(queue, "colour = 'red' AND weight > 3");
        assertEquals(List.of("red 1", "red 2"), receiveUntilMarker(reds, "red end", "reds"));
        reds.close();
        send(s, queue, "end", null);
        MessageConsumer rest = s.createConsumer(queue);
        assertEquals(List.of("blue 1", "none"), receiveUntilMarker(rest, "end", "the rest"));
    }

    @Test
    void competingSelectiveConsumersSplitAQueue() throws Exception {
        Connection c = connect();
        Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Queue queue = createdQueue(s, unique("selector-split"));
        MessageConsumer reds = s.createConsumer(queue, "colour = 'red'");
        MessageConsumer blues = s.createConsumer(queue, "colour IN ('blue')");
        for (int i = 0; i < 10; i++) {
            send(s, queue, "red " + i, "red");
            send(s, queue, "blue " + i, "blue");
        }
        send(s, queue, "red end", "red");
        send(s, queue, "blue end", "blue");
        List<String> redGot = receiveUntilMarker(reds, "red end", "reds");
        List<String> blueGot = receiveUntilMarker(blues, "blue end", "blues");
        assertEquals(10, redGot.size(), redGot.toString());
        assertEquals(10, blueGot.size(), blueGot.toString());
        redGot.forEach(t -> assertEquals("red", t.split(" ")[0]));
        blueGot.forEach(t -> assertEquals("blue", t.split(" ")[0]));
    }

    @Test
    void aTopicSubscriberGetsOnlyItsMatches() throws Exception {
        Connection c = connect();
        Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Destination topic = s.createTopic("ADDR:amq.topic/" + unique("prices"));
        MessageConsumer red = s.createConsumer(topic, "colour = 'red'");
        send(s, topic, "blue", "blue");
        send(s, topic, "red", "red");
        send(s, topic, "plain", null);
        send(s, topic, "red end", "red");
        assertEquals(List.of("red"), receiveUntilMarker(red, "red end", "topic subscriber"));
    }

    /**
     * The client binds a durable subscription's queue with its selector: ferryd applies it
     * there (as Broker-J does), so what the selector rejects is never kept for it.
     */
    @Test
    void aDurableSubscriberGetsOnlyItsMatchesFromWhileAway() throws Exception {
        Connection c = connect();
        Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Topic topic = s.createTopic("ADDR:amq.topic/" + unique("prices"));
        String name = unique("sub");
        TopicSubscriber sub = s.createDurableSubscriber(topic, name, "colour = 'red'", false);
        sub.close();
        send(s, topic, "blue while away", "blue");
        send(s, topic, "red while away", "red");
        send(s, topic, "red end", "red");
        sub = s.createDurableSubscriber(topic, name, "colour = 'red'", false);
        assertEquals(List.of("red while away"), receiveUntilMarker(sub, "red end", "durable"));
        sub.close();
        s.unsubscribe(name);
    }

    /**
     * A durable subscription taken up again with another selector: JMS makes that a new
     * subscription. What the old selector kept is gone, and only the new one's matches come.
     */
    @Test
    void aDurableSubscriberWithANewSelectorGetsOnlyTheNewMatches() throws Exception {
        Connection c = connect();
        Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Topic topic = s.createTopic("ADDR:amq.topic/" + unique("prices"));
        String name = unique("sub");
        TopicSubscriber sub = s.createDurableSubscriber(topic, name, "colour = 'red'", false);
        sub.close();
        send(s, topic, "red while away", "red");
        send(s, topic, "blue while away", "blue");
        sub = s.createDurableSubscriber(topic, name, "colour = 'blue'", false);
        send(s, topic, "red after", "red");
        send(s, topic, "blue after", "blue");
        send(s, topic, "blue end", "blue");
        assertEquals(List.of("blue after"), receiveUntilMarker(sub, "blue end", "durable"));
        sub.close();
        s.unsubscribe(name);
    }
}
