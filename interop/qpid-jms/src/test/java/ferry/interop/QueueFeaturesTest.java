package ferry.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import javax.jms.Connection;
import javax.jms.DeliveryMode;
import javax.jms.Message;
import javax.jms.MessageConsumer;
import javax.jms.MessageProducer;
import javax.jms.Queue;
import javax.jms.Session;
import javax.jms.TextMessage;

import org.junit.jupiter.api.Test;

/** Queue arguments seen from the Qpid JMS 0-10 client: priorities and dead-letter headers. */
class QueueFeaturesTest extends InteropSupport {

    /** A queue declared by the client with these x-declare arguments. */
    static Queue queueWithArgs(Session session, String name, String arguments) throws Exception {
        return session.createQueue("ADDR:" + name + "; {create: always, node: {x-declare: "
                + "{arguments: {" + arguments + "}}}}");
    }

    @Test
    void priorityQueueDeliversHigherPrioritiesFirst() throws Exception {
        Connection c = connect();
        Session session = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        String name = unique("priority");
        Queue queue = queueWithArgs(session, name, "'qpid.priorities': 10");
        MessageProducer producer = session.createProducer(queue);
        int[] priorities = {1, 9, 4, 9, 0};
        for (int i = 0; i < priorities.length; i++) {
            producer.send(session.createTextMessage("p" + priorities[i] + "-" + i),
                    DeliveryMode.NON_PERSISTENT, priorities[i], 0);
        }
        producer.send(session.createTextMessage("marker"), DeliveryMode.NON_PERSISTENT, 0, 0);
        MessageConsumer consumer = session.createConsumer(queue);
        assertEquals(List.of("p9-1", "p9-3", "p4-2", "p1-0", "p0-4"),
                receiveUntilMarker(consumer, "marker", "priority order"));
    }

    @Test
    void deadLettersCarryTheirHistoryAsProperties() throws Exception {
        Connection c = connect();
        Session session = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        String name = unique("ttl");
        String dlq = name + ".dlq";
        Queue dead = createdQueue(session, dlq);
        Queue queue = queueWithArgs(session, name, "'x-message-ttl': 50, "
                + "'x-dead-letter-exchange': '', 'x-dead-letter-routing-key': '" + dlq + "'");
        MessageProducer producer = session.createProducer(queue);
        TextMessage sent = session.createTextMessage("expires");
        sent.setStringProperty("app", "kept");
        producer.send(sent);
        MessageConsumer consumer = session.createConsumer(dead);
        Message m = receive(consumer, "dead-lettered message");
        assertEquals("expires", ((TextMessage) m).getText());
        assertEquals("kept", m.getStringProperty("app"));
        assertEquals(name, m.getStringProperty("x-first-death-queue"));
        assertEquals("expired", m.getStringProperty("x-first-death-reason"));
        assertEquals("expired", m.getStringProperty("x-last-death-reason"));
        List<?> deaths = assertInstanceOf(List.class, m.getObjectProperty("x-death"));
        Map<?, ?> death = assertInstanceOf(Map.class, deaths.get(0));
        assertEquals(name, String.valueOf(death.get("queue")));
        assertEquals(1L, ((Number) death.get("count")).longValue());
        List<String> names = new ArrayList<>();
        for (var e = m.getPropertyNames(); e.hasMoreElements();) {
            names.add((String) e.nextElement());
        }
        // The client lists only JMS-typed properties: the flat strings, not the x-death list.
        assertEquals(true, names.contains("x-first-death-reason"), "property names: " + names);
    }

    @Test
    void lastValueQueueKeepsTheLatestPerKey() throws Exception {
        Connection c = connect();
        Session session = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        String name = unique("lvq");
        Queue queue = queueWithArgs(session, name, "'qpid.last_value_queue_key': 'ticker'");
        MessageProducer producer = session.createProducer(queue);
        String[][] prices = {{"IBM", "100"}, {"HP", "20"}, {"IBM", "101"}, {"IBM", "102"}};
        for (String[] p : prices) {
            TextMessage m = session.createTextMessage(p[0] + "=" + p[1]);
            m.setStringProperty("ticker", p[0]);
            producer.send(m);
        }
        producer.send(session.createTextMessage("marker"));
        MessageConsumer consumer = session.createConsumer(queue);
        assertEquals(List.of("HP=20", "IBM=102"),
                receiveUntilMarker(consumer, "marker", "latest value per ticker"));
    }

    @Test
    void ringQueueDropsTheOldest() throws Exception {
        Connection c = connect();
        Session session = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        String name = unique("ring");
        Queue queue = queueWithArgs(session, name,
                "'qpid.max_count': 3, 'qpid.policy_type': 'ring'");
        MessageProducer producer = session.createProducer(queue);
        for (int i = 1; i <= 5; i++) {
            producer.send(session.createTextMessage("m" + i));
        }
        MessageConsumer consumer = session.createConsumer(queue);
        List<String> got = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            got.add(receiveText(consumer, "ring message " + i));
        }
        assertEquals(List.of("m3", "m4", "m5"), got);
    }
}
