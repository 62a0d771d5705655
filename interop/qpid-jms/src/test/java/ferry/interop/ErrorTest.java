package ferry.interop;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import javax.jms.Connection;
import javax.jms.JMSException;
import javax.jms.Queue;
import javax.jms.Session;

import org.junit.jupiter.api.Test;

class ErrorTest extends InteropSupport {

    /**
     * message.transfer to an exchange that does not exist: qpidd ends the
     * session with execution.exception not-found (404) and the client must
     * see that as a JMSException. (Broker-J instead routes such a message to
     * its default exchange and drops it, so this test fails there.)
     */
    @Test
    void transferToMissingExchangeIsNotFound() throws Exception {
        // sync_publish=all makes send() wait for the broker to complete the
        // transfer, so the session exception surfaces from send().
        Connection c = connect("&sync_publish='all'");
        String exchange = unique("no-such-exchange");

        // With a BURL destination the client would exchange.declare (and so
        // create) the exchange before the first send; switching that off (it
        // is read per session at construction) makes the transfer itself hit
        // the missing exchange, as a plain 0-10 publisher would.
        Session session = withSystemProperty("qpid.declare_exchanges", "false",
                () -> c.createSession(false, Session.AUTO_ACKNOWLEDGE));
        Queue destination = session.createQueue("BURL:direct://" + exchange + "//ignored?routingkey='key'");

        JMSException e = assertThrows(JMSException.class,
                () -> session.createProducer(destination).send(session.createTextMessage("nowhere to go")),
                "transfer to missing exchange " + exchange);
        assertNotFound(e);
        assertConnectionStillUsable(c);
    }

    /**
     * exchange.declare passive=true of a missing exchange: not-found (404).
     * The client declares BURL exchanges whose names start with "amq."
     * passively, which gives us a passive declare without private API.
     */
    @Test
    void passiveDeclareOfMissingExchangeIsNotFound() throws Exception {
        Connection c = connect("&sync_publish='all'");
        String exchange = "amq." + unique("missing");
        Session session = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Queue destination = session.createQueue("BURL:direct://" + exchange + "//ignored?routingkey='key'");

        // A consumer, not a producer: the client syncs at the end of createConsumer, so the
        // broker's 404 for the declare surfaces there. A producer's declare is not synced,
        // and the session could be detached (as qpidd does after an exception) before a
        // later send() notices, which then only reports "closed".
        JMSException e = assertThrows(JMSException.class,
                () -> session.createConsumer(destination),
                "passive declare of " + exchange);
        assertNotFound(e);
        assertConnectionStillUsable(c);
    }

    private static void assertNotFound(JMSException e) {
        String detail = describe(e);
        assertTrue(detail.contains("NOT_FOUND") || detail.contains("not-found") || detail.contains("404"),
                "expected a not-found (404) error, got: " + detail);
    }

    interface JmsCall<T> {
        T call() throws JMSException;
    }

    private static <T> T withSystemProperty(String key, String value, JmsCall<T> call) throws JMSException {
        String previous = System.setProperty(key, value);
        try {
            return call.call();
        } finally {
            if (previous == null) {
                System.clearProperty(key);
            } else {
                System.setProperty(key, previous);
            }
        }
    }
}
