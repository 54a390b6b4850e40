"""One module per DVC stage: ``run(params)`` does the work, ``main()`` is what ``dvc.yaml`` calls.

A stage is a thin script over the libraries (``lead.training``, ``lead.calibration``, ``lead.evaluation``,
``lead.registration``, ``lead.io``, the pure ``lead.core``): it reads
its section of ``params.yaml`` and its inputs, writes its outputs atomically and publishes its manifest last.
No stage imports another (``make lint``), and the ``lead`` command calls a stage only through ``run``
(``tests/contracts/test_rings.py``); what they share is :mod:`lead.dag` (the stages, their outputs) and
``_common`` (the command line and its clean exits). Tests call ``run`` directly on a temporary folder.
"""
