package ferry.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import javax.jms.Connection;
import javax.jms.JMSException;
import javax.jms.MessageConsumer;
import javax.jms.MessageProducer;
import javax.jms.Queue;
import javax.jms.Session;

import org.apache.qpid.AMQConnectionFailureException;
import org.apache.qpid.client.AMQConnection;
import org.apache.qpid.framing.ProtocolVersion;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Authentication and TLS with the real Qpid JMS 0-10 client, against the second ferryd that
 * run.sh starts with --auth yes, a users file and a TLS listener whose certificates it made,
 * and a third with the same users that offers only PLAIN (--sasl-mechanisms).
 */
class SecurityTest {
    private static String securePort;
    private static String tlsPort;
    private static String tlsDir;
    private static String user;
    private static String rabbitUser;
    private static String rabbitPassword;
    private static String password;
    private static String plainOnlyPort;

    private Connection open;

    @BeforeAll
    static void broker() {
        securePort = System.getProperty("ferry.securePort");
        if (securePort == null) {
            throw new IllegalStateException("ferry.securePort is not set: run the suite with run.sh");
        }
        // Empty when run.sh tests a broker started elsewhere (FERRY_PORT).
        Assumptions.assumeFalse(securePort.isEmpty(), "no secure broker to test");
        tlsPort = System.getProperty("ferry.tlsPort");
        tlsDir = System.getProperty("ferry.tlsDir");
        user = System.getProperty("ferry.user");
        password = System.getProperty("ferry.password");
        rabbitUser = System.getProperty("ferry.rabbitUser");
        rabbitPassword = System.getProperty("ferry.rabbitPassword");
        plainOnlyPort = System.getProperty("ferry.plainOnlyPort", "");
    }

    @AfterEach
    void close() throws JMSException {
        if (open != null) {
            open.close();
            open = null;
        }
    }

    /** The host is "localhost": the client checks it against the certificate's DNS names. */
    private static String url(String user, String password, String port, String options) {
        String broker = "tcp://localhost:" + port + "?connecttimeout='5000'&retries='0'&connectdelay='0'"
                + options;
        return "amqp://" + user + ":" + password + "@ferry-security/default?brokerlist='" + broker + "'";
    }

    private static String tls(String more) {
        return "&ssl='true'&trust_store='" + tlsDir + "/truststore.p12'&trust_store_password='changeit'"
                + more;
    }

    private Connection connect(String url) throws Exception {
        AMQConnection c = new AMQConnection(url);
        open = c;
        assertEquals(ProtocolVersion.v0_10, c.getProtocolVersion());
        c.setExceptionListener(e -> { });
        c.start();
        return c;
    }

    /** A message through a fresh queue: the connection really works. */
    private static void roundTrip(Connection c) throws Exception {
        Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Queue q = InteropSupport.createdQueue(s, InteropSupport.unique("security"));
        MessageConsumer consumer = s.createConsumer(q);
        MessageProducer producer = s.createProducer(q);
        producer.send(s.createTextMessage("secret hello"));
        assertEquals("secret hello", InteropSupport.receiveText(consumer, "over the secured connection"));
    }

    @Test
    void plainLoginAsAUsersFileUser() throws Exception {
        roundTrip(connect(url(user, password, securePort, "&sasl_mechs='PLAIN'")));
    }

    /** A user brought over from RabbitMQ keeps its password hash: PLAIN checks it, SCRAM cannot. */
    @Test
    void aUserWithARabbitMqPasswordHash() throws Exception {
        roundTrip(connect(url(rabbitUser, rabbitPassword, securePort, "&sasl_mechs='PLAIN'")));
        refused(url(rabbitUser, rabbitPassword + "x", securePort, "&sasl_mechs='PLAIN'"));
        refused(url(rabbitUser, rabbitPassword, securePort, "&sasl_mechs='SCRAM-SHA-256'"));
    }

    /**
     * Left to itself the client picks SCRAM-SHA-256 when ferryd offers it, which a RabbitMQ hash
     * cannot serve: such users need sasl_mechs='PLAIN' here, or a ferryd started with
     * --sasl-mechanisms without SCRAM-SHA-256 (the next test).
     */
    @Test
    void byDefaultTheClientPicksScramWhichARabbitMqHashCannotServe() {
        refused(url(rabbitUser, rabbitPassword, securePort, ""));
    }

    /** The same client, unchanged, against a ferryd started with --sasl-mechanisms PLAIN,AMQPLAIN. */
    @Test
    void withoutScramOnOfferTheDefaultChoiceLogsInAsARabbitMqHashUser() throws Exception {
        Assumptions.assumeFalse(plainOnlyPort.isEmpty(), "run.sh started no plain-only ferryd");
        roundTrip(connect(url(rabbitUser, rabbitPassword, plainOnlyPort, "")));
        refused(url(rabbitUser, rabbitPassword + "x", plainOnlyPort, ""));
        // Asked for by name, SCRAM is not there to pick: the client names what was offered over
        // 0-10 (ferryd refusing one sent anyway is a cargo test's job).
        Exception e = assertThrows(Exception.class,
                () -> connect(url(user, password, plainOnlyPort, "&sasl_mechs='SCRAM-SHA-256'")));
        assertTrue(String.valueOf(e.getMessage()).contains("Broker allows : PLAIN Client has"), e.toString());
    }

    @Test
    void scramSha256Login() throws Exception {
        roundTrip(connect(url(user, password, securePort, "&sasl_mechs='SCRAM-SHA-256'")));
    }

    /** The client turns ferryd's connection.close into this exception, with its text. */
    private void refused(String url) {
        AMQConnectionFailureException e = assertThrows(AMQConnectionFailureException.class,
                () -> connect(url));
        assertEquals("not-allowed: authentication failed", e.getMessage());
    }

    @Test
    void wrongPasswordAndUnknownUserAreRefusedAlike() {
        long started = System.nanoTime();
        refused(url(user, "not-the-password", securePort, "&sasl_mechs='PLAIN'"));
        refused(url("nobody", password, securePort, "&sasl_mechs='PLAIN'"));
        refused(url(user, "not-the-password", securePort, "&sasl_mechs='SCRAM-SHA-256'"));
        // Every refusal comes after a pause, so guessing is slow.
        assertTrue(System.nanoTime() - started >= 2_900_000_000L, "refusals were not delayed");
    }

    @Test
    void guestIsNotAUserWhenAUsersFileExists() {
        refused(url("guest", "guest", securePort, "&sasl_mechs='PLAIN'"));
    }

    @Test
    void overTls() throws Exception {
        roundTrip(connect(url(user, password, tlsPort, "&sasl_mechs='PLAIN'" + tls(""))));
    }

    @Test
    void wrongPasswordOverTls() {
        refused(url(user, "nope", tlsPort, "&sasl_mechs='PLAIN'" + tls("")));
    }

    @Test
    void externalWithAClientCertificate() throws Exception {
        String keyStore = "&key_store='" + tlsDir + "/client.p12'&key_store_password='changeit'";
        roundTrip(connect(url("ignored", "ignored", tlsPort, "&sasl_mechs='EXTERNAL'" + tls(keyStore))));
    }
}
