package ferry.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;

import javax.jms.Connection;
import javax.jms.Message;
import javax.jms.MessageConsumer;
import javax.jms.MessageProducer;
import javax.jms.Queue;
import javax.jms.Session;
import javax.jms.TextMessage;

import org.junit.jupiter.api.Test;

/**
 * Unacknowledged messages go back to the queue when the session ends and
 * come again flagged as redelivered; acknowledged ones are gone for good.
 */
class ClientAcknowledgeTest extends InteropSupport {

    @Test
    void unackedMessagesAreRedeliveredThenAckRemovesThem() throws Exception {
        Connection c = connect();
        String name = unique("clientack");
        Session producerSession = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Queue queue = createdQueue(producerSession, name);
        MessageProducer producer = producerSession.createProducer(queue);
        List<String> sent = List.of("ack-1", "ack-2", "ack-3");
        for (String text : sent) {
            producer.send(producerSession.createTextMessage(text));
        }

        Session first = c.createSession(false, Session.CLIENT_ACKNOWLEDGE);
        MessageConsumer firstConsumer = first.createConsumer(createdQueue(first, name));
        List<String> firstRound = new ArrayList<>();
        for (int i = 0; i < sent.size(); i++) {
            Message m = receive(firstConsumer, "first delivery " + i);
            assertFalse(m.getJMSRedelivered(), "first delivery must not be flagged redelivered");
            firstRound.add(((TextMessage) m).getText());
        }
        assertEquals(sent, firstRound);
        first.close(); // without acknowledge()

        Session second = c.createSession(false, Session.CLIENT_ACKNOWLEDGE);
        MessageConsumer secondConsumer = second.createConsumer(createdQueue(second, name));
        List<String> secondRound = new ArrayList<>();
        Message last = null;
        for (int i = 0; i < sent.size(); i++) {
            last = receive(secondConsumer, "redelivery " + i);
            assertTrue(last.getJMSRedelivered(), "redelivered message must have JMSRedelivered=true");
            secondRound.add(((TextMessage) last).getText());
        }
        assertEquals(sent, secondRound, "redelivered messages (order as in the queue)");
        // JMS: acknowledging one message acknowledges all consumed so far.
        last.acknowledge();
        second.close();

        // If the acknowledged messages were still queued they would come
        // before this marker.
        String marker = "marker-" + name;
        producer.send(producerSession.createTextMessage(marker));
        Session third = c.createSession(false, Session.CLIENT_ACKNOWLEDGE);
        MessageConsumer thirdConsumer = third.createConsumer(createdQueue(third, name));
        Message m = receive(thirdConsumer, "marker after acknowledged messages");
        assertEquals(marker, ((TextMessage) m).getText(), "acknowledged messages must be gone");
        assertFalse(m.getJMSRedelivered());
        m.acknowledge();
    }
}
