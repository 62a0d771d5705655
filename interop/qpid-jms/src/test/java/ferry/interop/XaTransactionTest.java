package ferry.interop;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;

import javax.jms.Connection;
import javax.jms.Message;
import javax.jms.MessageConsumer;
import javax.jms.MessageProducer;
import javax.jms.Queue;
import javax.jms.Session;
import javax.jms.TextMessage;
import javax.jms.XASession;
import javax.transaction.xa.XAException;
import javax.transaction.xa.XAResource;
import javax.transaction.xa.Xid;

import org.apache.qpid.client.AMQConnectionURL;
import org.apache.qpid.client.XAConnectionImpl;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * XA sessions (javax.jms.XASession), which the Qpid client maps onto the 0-10 dtx class:
 * the work between XAResource.start and end belongs to the branch, and takes effect only
 * when a transaction manager commits it, in one phase or after prepare.
 */
class XaTransactionTest extends InteropSupport {

    private XAConnectionImpl xaConnection;

    /** A transaction branch id, as a transaction manager would make one. */
    record TestXid(int getFormatId, byte[] getGlobalTransactionId, byte[] getBranchQualifier)
            implements Xid {
        static TestXid of(String global) {
            return new TestXid(4660, global.getBytes(StandardCharsets.UTF_8),
                    "branch".getBytes(StandardCharsets.UTF_8));
        }
    }

    XASession xaSession() throws Exception {
        if (xaConnection == null) {
            xaConnection = new XAConnectionImpl(new AMQConnectionURL(connectionUrl("")));
            xaConnection.setExceptionListener(e -> { });
            xaConnection.start();
        }
        return xaConnection.createXASession();
    }

    @AfterEach
    void closeXaConnection() throws Exception {
        if (xaConnection != null) {
            xaConnection.close();
        }
    }

    @Test
    void twoPhaseCommitMovesAMessage() throws Exception {
        Connection c = connect();
        Session plain = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Queue from = createdQueue(plain, unique("xa.from"));
        Queue to = createdQueue(plain, unique("xa.to"));
        plain.createProducer(from).send(plain.createTextMessage("work"));

        XASession xs = xaSession();
        XAResource xa = xs.getXAResource();
        Session s = xs.getSession();
        MessageConsumer consumer = s.createConsumer(from);
        MessageProducer producer = s.createProducer(to);
        Xid xid = TestXid.of(unique("xa.2pc"));
        xa.start(xid, XAResource.TMNOFLAGS);
        Message got = receive(consumer, "the message to move");
        producer.send(s.createTextMessage("moved:" + ((TextMessage) got).getText()));
        xa.end(xid, XAResource.TMSUCCESS);

        MessageConsumer check = plain.createConsumer(to);
        assertEquals(null, check.receive(300), "nothing arrives before the commit");
        assertEquals(XAResource.XA_OK, xa.prepare(xid));
        assertEquals(null, check.receive(300), "nor after the prepare");
        xa.commit(xid, false);
        Message moved = receive(check, "the moved message");
        assertEquals("moved:work", ((TextMessage) moved).getText());

        // The receive was committed too: nothing is left to take.
        consumer.close();
        plain.createProducer(from).send(plain.createTextMessage("marker"));
        assertEquals(List.of(), receiveUntilMarker(plain.createConsumer(from), "marker",
                "after the committed receive"));
    }

    @Test
    void rollbackDropsTheSendsAndReturnsTheReceives() throws Exception {
        Connection c = connect();
        Session plain = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Queue queue = createdQueue(plain, unique("xa.rollback"));
        plain.createProducer(queue).send(plain.createTextMessage("kept"));

        XASession xs = xaSession();
        XAResource xa = xs.getXAResource();
        Session s = xs.getSession();
        MessageConsumer consumer = s.createConsumer(queue);
        Xid xid = TestXid.of(unique("xa.rb"));
        xa.start(xid, XAResource.TMNOFLAGS);
        Message got = receive(consumer, "the message");
        assertEquals("kept", ((TextMessage) got).getText());
        s.createProducer(queue).send(s.createTextMessage("never"));
        xa.end(xid, XAResource.TMSUCCESS);
        consumer.close();
        xa.rollback(xid);

        Message again = receive(plain.createConsumer(queue), "the rolled-back receive");
        assertEquals("kept", ((TextMessage) again).getText());
        assertTrue(again.getJMSRedelivered(), "a rolled-back receive comes back redelivered");
    }

    @Test
    void onePhaseCommitAndTheBranchRules() throws Exception {
        Connection c = connect();
        Session plain = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Queue queue = createdQueue(plain, unique("xa.1pc"));
        XASession xs = xaSession();
        XAResource xa = xs.getXAResource();
        Session s = xs.getSession();
        Xid xid = TestXid.of(unique("xa.1pc"));
        xa.start(xid, XAResource.TMNOFLAGS);
        s.createProducer(queue).send(s.createTextMessage("one"));
        xa.end(xid, XAResource.TMSUCCESS);
        // Not prepared: a two-phase commit is refused, a one-phase commit goes through.
        assertThrows(XAException.class, () -> xa.commit(xid, false));
        xa.commit(xid, true);
        Message got = receive(plain.createConsumer(queue), "the committed send");
        assertEquals("one", ((TextMessage) got).getText());
        // Completed and forgotten: unknown now.
        XAException unknown = assertThrows(XAException.class, () -> xa.rollback(xid));
        assertEquals(XAException.XAER_NOTA, unknown.errorCode);
    }

    @Test
    void recoverListsThePreparedBranches() throws Exception {
        XASession xs = xaSession();
        XAResource xa = xs.getXAResource();
        Session s = xs.getSession();
        Queue queue = createdQueue(s, unique("xa.recover"));
        String prefix = unique("xa.rec");
        List<Xid> prepared = List.of(TestXid.of(prefix + ".1"), TestXid.of(prefix + ".2"));
        for (Xid xid : prepared) {
            xa.start(xid, XAResource.TMNOFLAGS);
            s.createProducer(queue).send(s.createTextMessage("in doubt"));
            xa.end(xid, XAResource.TMSUCCESS);
            assertEquals(XAResource.XA_OK, xa.prepare(xid));
        }
        Xid[] recovered = xa.recover(XAResource.TMSTARTRSCAN);
        assertNotNull(recovered);
        Set<String> globals = Arrays.stream(recovered)
                .map(x -> new String(x.getGlobalTransactionId(), StandardCharsets.UTF_8))
                .collect(Collectors.toSet());
        for (Xid xid : prepared) {
            String global = new String(xid.getGlobalTransactionId(), StandardCharsets.UTF_8);
            assertTrue(globals.contains(global), global + " in " + globals);
        }
        Xid first = Arrays.stream(recovered)
                .filter(x -> Arrays.equals(x.getGlobalTransactionId(),
                        prepared.get(0).getGlobalTransactionId()))
                .findFirst().orElseThrow();
        assertEquals(4660, first.getFormatId());
        assertArrayEquals("branch".getBytes(StandardCharsets.UTF_8), first.getBranchQualifier());
        for (Xid xid : prepared) {
            xa.rollback(xid);
        }
    }
}
