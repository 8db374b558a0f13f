"""The deterministic simulator's core (issue 39, docs/simulation.md): virtual time and a model of a ZooKeeper 3.4
server, both pure — no threads, no sockets, no real time — so that one seed gives one run, byte for byte.

- :mod:`.scheduler`: the discrete-event scheduler and the :class:`~.scheduler.Clock` the runtime will read;
- :mod:`.zookeeper`: the ZooKeeper server as a state machine fed with requests and time, returning replies and the
  watch notifications to deliver (its parts: :mod:`.zk_codes`, :mod:`.zk_tree`, :mod:`.zk_sessions`);
- :mod:`.tasks`, :mod:`.network`, :mod:`.zk_jute`, :mod:`.zk_wire`, :mod:`.kazoo_handler`, :mod:`.kazoo_world`: an
  unmodified kazoo client on cooperative tasks, a simulated network and that server behind its wire protocol.

A layer-3 package: later pieces run the consumer's own code (layer 2) on it.
"""
