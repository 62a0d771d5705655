# A small qpid.messaging client for run.sh (Python 2.7, qpid-python 1.36):
#   client.py BROKER send ADDRESS COUNT    send COUNT messages to ADDRESS
#   client.py BROKER hold QUEUE            subscribe to QUEUE and stay until killed
import sys
import time

from qpid.messaging import Connection, Message

broker, command, target = sys.argv[1:4]
conn = Connection.establish(broker)
try:
    session = conn.session()
    if command == "send":
        sender = session.sender(target)
        for i in range(int(sys.argv[4])):
            sender.send(Message("message %d" % i))
        session.sync()
    elif command == "hold":
        receiver = session.receiver(target)
        receiver.capacity = 10
        sys.stdout.write("holding\n")
        sys.stdout.flush()
        while True:
            time.sleep(1)
    else:
        raise SystemExit("unknown command %s" % command)
finally:
    conn.close()
