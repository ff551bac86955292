"""What every Keras backend shares, engine-neutral: the lowering entries (``lowering.py``, spec
op -> Keras layers and ``keras.ops``), the weight layouts (``weights.py``), the spec's optimisers
as Keras optimisers (``optim.py``), the source face (``source.py``) and the model's two faces
that Keras runs the same on every engine (``model.py``).

Not a backend itself (it has no registry line): ``tensorflow``, ``keras_jax`` and ``keras_torch``
are, each choosing its engine in its own ``runtime.py`` before ``keras`` is imported. Importing
this package imports nothing.
"""
