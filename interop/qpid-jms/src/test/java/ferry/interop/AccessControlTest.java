package ferry.interop;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import javax.jms.Connection;
import javax.jms.JMSException;
import javax.jms.MessageProducer;
import javax.jms.Queue;
import javax.jms.Session;

import org.junit.jupiter.api.Test;

/**
 * Access control as the Qpid JMS client sees it. run.sh starts ferryd with the suite ACL
 * (interop/lib/ferryd.acl), which allows everything except names the tests below use: the
 * broker refuses those with execution.exception unauthorized-access (403) and ends the
 * session, as qpidd does, and the client raises a JMSException.
 */
class AccessControlTest extends InteropSupport {

    @Test
    void deniedQueueCreationRaisesJMSException() throws Exception {
        Connection c = connect();
        Session session = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Queue denied = createdQueue(session, unique("acl-denied"));
        // The client declares the queue and syncs at the end of createConsumer.
        JMSException e = assertThrows(JMSException.class, () -> session.createConsumer(denied),
                "queue.declare of a name the ACL denies");
        assertUnauthorized(e);
        assertConnectionStillUsable(c);
    }

    @Test
    void deniedConsumeRaisesJMSException() throws Exception {
        Connection c = connect();
        String name = unique("acl-no-consume");
        // Creating the queue is allowed; subscribing to it is not.
        Session setup = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        setup.createProducer(createdQueue(setup, name)).close();
        Session session = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Queue queue = session.createQueue("ADDR:" + name);
        JMSException e = assertThrows(JMSException.class, () -> session.createConsumer(queue),
                "message.subscribe to a queue the ACL denies consuming from");
        assertUnauthorized(e);
        assertConnectionStillUsable(c);
    }

    @Test
    void deniedPublishRaisesJMSException() throws Exception {
        // sync_publish=all makes send() wait for the broker to complete the transfer, so the
        // refusal surfaces from send().
        Connection c = connect("&sync_publish='all'");
        Session session = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Queue queue = createdQueue(session, unique("acl-no-publish"));
        MessageProducer producer = session.createProducer(queue);
        JMSException e = assertThrows(JMSException.class,
                () -> producer.send(session.createTextMessage("refused")),
                "message.transfer with a routing key the ACL denies");
        assertUnauthorized(e);
        assertConnectionStillUsable(c);
    }

    private static void assertUnauthorized(JMSException e) {
        String text = describe(e);
        assertTrue(text.contains("ACL denied")
                        && (text.contains("UNAUTHORIZED_ACCESS") || text.contains("unauthorized-access")
                                || text.contains("403")),
                "expected an unauthorized-access (403) ACL denial, got: " + text);
    }
}
