"""What every Keras backend shares, engine-neutral: the ops (``ops/<op>.py``, one module per spec
op: its Keras layer(s), its functional-API line and its weight binding side by side), the layers
and composition they share (``lowering.py``: spec graph -> Keras layers and ``keras.ops``), the
weight bindings and activation layouts (``weights.py``), the spec's optimisers as Keras
optimisers (``optim.py``), how the source lines compose (``source.py``) and the model's two faces
that Keras runs the same on every engine (``model.py``).

Not a backend itself (it has no registry line): ``tensorflow``, ``keras_jax`` and ``keras_torch``
are, each taking ``ops/`` whole as its op table (its ``source.py``) and choosing its engine in its
own ``runtime.py`` before ``keras`` is imported. Importing this package imports nothing.
"""
