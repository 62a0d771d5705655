package ferry.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;

import javax.jms.Connection;
import javax.jms.MessageConsumer;
import javax.jms.MessageProducer;
import javax.jms.Session;
import javax.jms.TextMessage;

import org.junit.jupiter.api.Test;

/**
 * amq.match routing with x-match all / any, bound through the Qpid address
 * syntax (node x-bindings with binding arguments).
 */
class HeadersExchangeTest extends InteropSupport {

    @Test
    void xMatchAllAndAny() throws Exception {
        Connection c = connect();
        Session session = c.createSession(false, Session.AUTO_ACKNOWLEDGE);

        // Header values carry the run id so messages from other runs on the
        // same broker cannot match, in particular for x-match any.
        String sales = "sales-" + RUN_ID;
        String eu = "eu-" + RUN_ID;

        MessageConsumer all = session.createConsumer(session.createQueue(boundQueue(unique("headers.all"), "all", sales, eu)));
        MessageConsumer any = session.createConsumer(session.createQueue(boundQueue(unique("headers.any"), "any", sales, eu)));

        MessageProducer producer = session.createProducer(session.createQueue("ADDR:amq.match"));
        send(session, producer, "both-exact", sales, eu, null);
        send(session, producer, "dept-only-match", sales, "us", null);
        send(session, producer, "region-only-match", "ops", eu, null);
        send(session, producer, "no-match", "ops", "us", null);
        send(session, producer, "dept-present-region-absent", sales, null, null);
        send(session, producer, "both-plus-extra", sales, eu, "extra");
        send(session, producer, "no-headers", null, null, null);
        String marker = "end-of-test";
        send(session, producer, marker, sales, eu, null);

        assertEquals(List.of("both-exact", "both-plus-extra"),
                receiveUntilMarker(all, marker, "x-match all queue"), "x-match all");
        assertEquals(List.of("both-exact", "dept-only-match", "region-only-match",
                        "dept-present-region-absent", "both-plus-extra"),
                receiveUntilMarker(any, marker, "x-match any queue"), "x-match any");
    }

    private static String boundQueue(String name, String xMatch, String dept, String region) {
        return "ADDR:" + name + "; {create: always, node: {type: queue, x-bindings: ["
                + "{exchange: 'amq.match', key: '" + name + "', arguments: "
                + "{'x-match': '" + xMatch + "', dept: '" + dept + "', region: '" + region + "'}}]}}";
    }

    private static void send(Session session, MessageProducer producer, String text,
                             String dept, String region, String extra) throws Exception {
        TextMessage m = session.createTextMessage(text);
        if (dept != null) {
            m.setStringProperty("dept", dept);
        }
        if (region != null) {
            m.setStringProperty("region", region);
        }
        if (extra != null) {
            m.setStringProperty("extra", extra);
        }
        producer.send(m);
    }
}
