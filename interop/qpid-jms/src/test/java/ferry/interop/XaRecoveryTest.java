package ferry.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Comparator;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import javax.jms.Connection;
import javax.jms.Message;
import javax.jms.MessageConsumer;
import javax.jms.Queue;
import javax.jms.Session;
import javax.jms.TextMessage;
import javax.jms.XASession;
import javax.transaction.xa.XAResource;
import javax.transaction.xa.Xid;

import org.apache.qpid.client.AMQConnection;
import org.apache.qpid.client.AMQConnectionURL;
import org.apache.qpid.client.XAConnectionImpl;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * A prepared XA branch outlives a crash of the broker, as a transaction manager's recovery
 * needs: a ferryd of the test's own, on its own data directory, is killed (SIGKILL) after
 * XAResource.prepare; after the restart XAResource.recover lists the branch, which still
 * holds what it received and keeps what it sent out of sight until it is committed or
 * rolled back.
 */
class XaRecoveryTest extends InteropSupport {

    private Process ferryd;
    private int port;
    private Path dataDir;

    @BeforeEach
    void startOwnBroker() throws Exception {
        assumeTrue(System.getenv("FERRYD_BIN") != null, "FERRYD_BIN names a ferryd to start");
        dataDir = Files.createTempDirectory("ferry-xa-recovery");
        start();
    }

    @AfterEach
    void stopOwnBroker() throws Exception {
        if (ferryd != null) {
            ferryd.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
        }
        if (dataDir != null) {
            try (Stream<Path> paths = Files.walk(dataDir)) {
                paths.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            }
        }
    }

    private void start() throws Exception {
        ferryd = new ProcessBuilder(System.getenv("FERRYD_BIN"), "--port", "0", "--interface",
                "127.0.0.1", "--auth", "no", "--data-dir", dataDir.toString())
                .redirectError(ProcessBuilder.Redirect.DISCARD)
                .start();
        BufferedReader out = new BufferedReader(
                new InputStreamReader(ferryd.getInputStream(), StandardCharsets.UTF_8));
        String line = out.readLine();
        assertNotNull(line, "ferryd prints the port it listens on");
        port = Integer.parseInt(line.trim());
    }

    /** SIGKILL: nothing is flushed or closed on the way down. */
    private void crashAndRestart() throws Exception {
        ferryd.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
        start();
    }

    private Connection plainConnection() throws Exception {
        Connection c = new AMQConnection(connectionUrl(port, ""));
        c.setExceptionListener(e -> { });
        c.start();
        return c;
    }

    private XAConnectionImpl xaConnection() throws Exception {
        XAConnectionImpl c = new XAConnectionImpl(new AMQConnectionURL(connectionUrl(port, "")));
        c.setExceptionListener(e -> { });
        c.start();
        return c;
    }

    private static Queue durable(Session s, String name) throws Exception {
        return s.createQueue("ADDR:" + name + "; {create: always, node: {durable: true}}");
    }

    @Test
    void aPreparedBranchCommitsAfterACrash() throws Exception {
        crashBetweenPrepareAndOutcome(true);
    }

    @Test
    void aPreparedBranchRollsBackAfterACrash() throws Exception {
        crashBetweenPrepareAndOutcome(false);
    }

    private void crashBetweenPrepareAndOutcome(boolean commit) throws Exception {
        String from = unique("xa.crash.from");
        String to = unique("xa.crash.to");
        Xid xid = XaTransactionTest.TestXid.of(unique("xa.crash"));

        Connection c = plainConnection();
        Session plain = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        durable(plain, to);
        plain.createProducer(durable(plain, from)).send(plain.createTextMessage("work"));
        XAConnectionImpl xc = xaConnection();
        XASession xs = xc.createXASession();
        XAResource xa = xs.getXAResource();
        Session s = xs.getSession();
        MessageConsumer consumer = s.createConsumer(durable(s, from));
        xa.start(xid, XAResource.TMNOFLAGS);
        Message got = receive(consumer, "the work");
        s.createProducer(durable(s, to))
                .send(s.createTextMessage("result:" + ((TextMessage) got).getText()));
        xa.end(xid, XAResource.TMSUCCESS);
        assertEquals(XAResource.XA_OK, xa.prepare(xid));
        consumer.close();
        xc.close();
        c.close();

        crashAndRestart();

        xc = xaConnection();
        xa = xc.createXASession().getXAResource();
        Xid[] inDoubt = xa.recover(XAResource.TMSTARTRSCAN | XAResource.TMENDRSCAN);
        assertTrue(Arrays.stream(inDoubt).anyMatch(x -> x.getFormatId() == xid.getFormatId()
                && Arrays.equals(x.getGlobalTransactionId(), xid.getGlobalTransactionId())
                && Arrays.equals(x.getBranchQualifier(), xid.getBranchQualifier())),
                "XAResource.recover lists the prepared branch: " + Arrays.toString(inDoubt));
        c = plainConnection();
        plain = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        MessageConsumer fromQueue = plain.createConsumer(durable(plain, from));
        MessageConsumer toQueue = plain.createConsumer(durable(plain, to));
        assertNull(fromQueue.receive(300), "the branch still holds what it received");
        assertNull(toQueue.receive(300), "what it sent waits for its outcome");
        if (commit) {
            xa.commit(xid, false);
            assertEquals("result:work", receiveText(toQueue, "the committed send"));
            assertNull(fromQueue.receive(300), "the committed receive is gone for good");
        } else {
            xa.rollback(xid);
            assertEquals("work", receiveText(fromQueue, "the rolled-back receive"));
            assertNull(toQueue.receive(300), "the rolled-back send is gone");
        }
        assertEquals(0, xa.recover(XAResource.TMSTARTRSCAN | XAResource.TMENDRSCAN).length,
                "nothing is in doubt after the outcome");
        xc.close();
        c.close();
    }
}
