package ferry.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;

import javax.jms.Connection;
import javax.jms.MessageConsumer;
import javax.jms.MessageProducer;
import javax.jms.Session;

import org.junit.jupiter.api.Test;

/** amq.topic with '*' (exactly one word) and '#' (zero or more words). */
class TopicWildcardTest extends InteropSupport {

    @Test
    void starAndHashSubscribersGetWhatTheirPatternsMatch() throws Exception {
        Connection c = connect();
        Session subSession = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Session pubSession = c.createSession(false, Session.AUTO_ACKNOWLEDGE);

        // Routing keys are namespaced by the run id so other runs on the
        // same broker cannot match these patterns.
        String p = "t" + RUN_ID;
        MessageConsumer star = subSession.createConsumer(
                subSession.createTopic("ADDR:amq.topic/" + p + ".*.news"));
        MessageConsumer hash = subSession.createConsumer(
                subSession.createTopic("ADDR:amq.topic/" + p + ".europe.#"));

        String[] keys = {
            p + ".usa.news",            // star only
            p + ".europe.news",         // both
            p + ".europe.weather",      // hash only
            p + ".europe.weather.uk",   // hash only: '*' is exactly one word
            p + ".usa.weather",         // neither
            p + ".europe",              // hash only: '#' matches zero words
            p + ".a.b.news",            // neither: two words where '*' wants one
            p + "x.europe.news",        // neither: first word differs
        };
        for (String key : keys) {
            publish(pubSession, key, key);
        }
        // Matches both patterns and comes last on the same session, so
        // everything published before it has been routed by then.
        String marker = "end-of-test";
        publish(pubSession, p + ".europe.news", marker);

        List<String> starGot = receiveUntilMarker(star, marker, "'*' subscriber");
        List<String> hashGot = receiveUntilMarker(hash, marker, "'#' subscriber");

        assertEquals(List.of(p + ".usa.news", p + ".europe.news"), starGot, "'*.news' subscriber");
        assertEquals(List.of(p + ".europe.news", p + ".europe.weather", p + ".europe.weather.uk", p + ".europe"),
                hashGot, "'europe.#' subscriber");
    }

    private static void publish(Session session, String routingKey, String text) throws Exception {
        MessageProducer producer = session.createProducer(session.createTopic("ADDR:amq.topic/" + routingKey));
        producer.send(session.createTextMessage(text));
        producer.close();
    }
}
