package ferry.interop.jms2;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import jakarta.jms.JMSConsumer;
import jakarta.jms.JMSContext;
import jakarta.jms.JMSSecurityRuntimeException;
import jakarta.jms.TemporaryQueue;
import jakarta.jms.Topic;

import org.apache.qpid.jms.JmsConnectionFactory;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * SASL and TLS against the second ferryd run.sh starts (--auth yes, a users file made by
 * `ferry user`, a TLS listener with certificates made at test time).
 */
class SecurityTest extends Support {
    static final String SECURE_PORT = System.getProperty("ferry.securePort", "");
    static final String TLS_PORT = System.getProperty("ferry.tlsPort", "");
    static final String TLS_DIR = System.getProperty("ferry.tlsDir", "");
    static final String USER = System.getProperty("ferry.user", "");
    static final String PASSWORD = System.getProperty("ferry.password", "");

    @BeforeEach
    void needsTheSecureBroker() {
        assumeFalse(SECURE_PORT.isEmpty(), "FERRY_PORT given: no secure broker to test");
    }

    static void roundTrip(JmsConnectionFactory factory) {
        try (JMSContext ctx = factory.createContext()) {
            TemporaryQueue queue = ctx.createTemporaryQueue();
            var consumer = ctx.createConsumer(queue);
            ctx.createProducer().send(queue, "secret");
            assertEquals("secret", consumer.receiveBody(String.class, TIMEOUT_MS));
        }
    }

    static JmsConnectionFactory plain(String mechanism, String password) {
        return new JmsConnectionFactory(USER, password,
                "amqp://" + HOST + ":" + SECURE_PORT + "?amqp.saslMechanisms=" + mechanism);
    }

    @Test
    void plainLogin() {
        roundTrip(plain("PLAIN", PASSWORD));
    }

    @Test
    void scramSha256Login() {
        roundTrip(plain("SCRAM-SHA-256", PASSWORD));
    }

    @Test
    void wrongPasswordsAreRefused() {
        assertThrows(JMSSecurityRuntimeException.class,
                () -> plain("SCRAM-SHA-256", "wrong").createContext().close());
        assertThrows(JMSSecurityRuntimeException.class,
                () -> plain("PLAIN", "wrong").createContext().close());
    }

    static String tls(boolean clientCertificate) {
        String url = "amqps://localhost:" + TLS_PORT
                + "?transport.trustStoreLocation=" + TLS_DIR + "/truststore.p12"
                + "&transport.trustStorePassword=changeit&transport.trustStoreType=PKCS12";
        if (clientCertificate) {
            url += "&transport.keyStoreLocation=" + TLS_DIR + "/client.p12"
                    + "&transport.keyStorePassword=changeit&transport.keyStoreType=PKCS12"
                    + "&amqp.saslMechanisms=EXTERNAL";
        } else {
            url += "&amqp.saslMechanisms=PLAIN";
        }
        return url;
    }

    @Test
    void overTls() {
        roundTrip(new JmsConnectionFactory(USER, PASSWORD, tls(false)));
    }

    @Test
    void externalWithAClientCertificate() {
        roundTrip(new JmsConnectionFactory(tls(true)));
    }

    /**
     * The secure ferryd's ACL forbids deleting queues named acl-undeletable-*: a durable
     * subscription of that client id cannot be unsubscribed. The refusal comes back on the
     * unsubscribe, and the subscription keeps collecting.
     */
    @Test
    void anUnsubscribeTheAclRefusesFailsAndTheSubscriptionStays() {
        JmsConnectionFactory factory = plain("PLAIN", PASSWORD);
        factory.setClientID("acl-undeletable-" + unique("client"));
        try (JMSContext ctx = factory.createContext()) {
            Topic topic = ctx.createTopic("amq.topic/" + unique("news"));
            ctx.createDurableConsumer(topic, "kept").close();
            assertThrows(JMSSecurityRuntimeException.class, () -> ctx.unsubscribe("kept"));
            ctx.createProducer().send(topic, "still collected");
            JMSConsumer consumer = ctx.createDurableConsumer(topic, "kept");
            assertEquals("still collected", consumer.receiveBody(String.class, TIMEOUT_MS));
            consumer.close();
        }
    }
}
