"""What verl loads inside its processes for a CPU run: registered by :mod:`verl_ext.plugin`, imported by verl's
driver, trainer workers and rollout servers. Nothing here starts a run (that is :mod:`verl_ext.cpu`, the harness).

- :mod:`~verl_ext.cpu_runtime.platform` -- the platform verl selects with ``VERL_PLATFORM=cpu``;
- :mod:`~verl_ext.cpu_runtime.rollout_server` (with :mod:`~verl_ext.cpu_runtime.generation`,
  :mod:`~verl_ext.cpu_runtime.lora`, :mod:`~verl_ext.cpu_runtime.weight_checksum`, :mod:`~verl_ext.rollout_events`),
  :mod:`~verl_ext.cpu_runtime.rollout_replica`, :mod:`~verl_ext.cpu_runtime.server_adapter` -- rollout name ``cpu``;
- :mod:`~verl_ext.cpu_runtime.checkpoint_engine` -- the ``gloo`` checkpoint engine (weights trainer -> rollout);
- :mod:`~verl_ext.cpu_runtime.sharded_checkpoint` -- the actor's weights in verl's sharded checkpoint, joined;
- :mod:`~verl_ext.cpu_runtime.patches` -- the patches a CPU run needs (listed in :mod:`verl_ext.verl_internals`);
- :mod:`~verl_ext.cpu_runtime.loopback_store` -- torch.distributed's rendezvous store on loopback only;
- :mod:`~verl_ext.cpu_runtime.topology` -- trainer ranks x nodes, and what such a topology needs from Ray,
  checked in the driver before Ray starts;
- :mod:`~verl_ext.cpu_runtime.registration` -- ``register_cpu_backend()``, called by :mod:`verl_ext.plugin`.

Importing this package imports neither verl nor torch (its modules do what they need).
"""
