"""Datasets for the Rosetta workloads: real on-disk formats, or synthetic files in the same
formats, always verified by checksum and read without trusting pickles.

Public API::

    load_cifar10(data_dir=None, *, layout="NCHW") -> CifarData
    load_imdb(data_dir=None, *, num_words=30000, maxlen=150, padding="pre",
              start_id=1, oov_id=2, index_from=3) -> ImdbData
    time_major(x) -> np.ndarray                       # (N, T) -> (T, N), contiguous copy
    random_image_batches(n_images=1280, batch_size=32, *, seed=0, layout="NCHW")
    random_image_batch(index, *, batch_size=32, seed=0, layout="NCHW")
    iter_image_folder(folder, batch_size=32, *, layout="NCHW")
    load_image_folder(folder, *, layout="NCHW")
    iterate_batches(x, y, batch_size, *, shuffle=False, seed=0, epoch=0, batch_axis=0)
    write_synthetic_cifar10(data_dir=None, *, seed=0, n_train=50000, n_test=10000) -> Path
    write_synthetic_imdb(data_dir=None, *, seed=0, n_train=25000, n_test=25000) -> Path
    fetch_dataset(name, data_dir=None, *, force=False, ...) -> Path
    extract_cifar10(data_dir=None) -> Path
    safe_extract(archive, dest) -> list[Path]
    describe(data_dir=None) -> list[DatasetStatus]
    resolve_data_dir(data_dir=None) -> Path
    accept(path, data_dir=None, *, dataset=None, force=False) -> Accepted
    prepare_data(datasets, data_dir) -> dict[str, str]   # before a run: verify, say the source
    registry.get(name) -> DatasetEntry                   # every data set, looked up by name

Data sources (``source`` of every loader and record): ``official`` (the official checksum),
``user-provided`` (a user's copy checked in by ``rosetta data accept``), ``synthetic``
(``rosetta data synth``) and ``generated`` (the random ResNet-50 images, no file).

No deep-learning framework is imported here (NumPy and the standard library only; Pillow
lazily, for image folders).
"""

from rosetta.datasets import registry
from rosetta.datasets.accept import Accepted, accept
from rosetta.datasets.batches import epoch_order, iterate_batches, num_batches
from rosetta.datasets.checksums import CIFAR10_ARCHIVE, IMDB_ARCHIVE, RemoteFile, Verification
from rosetta.datasets.cifar10 import CifarData, extract_cifar10, load_cifar10
from rosetta.datasets.download import fetch, fetch_dataset
from rosetta.datasets.imdb import ImdbData, keras_sequences, load_imdb, time_major
from rosetta.datasets.info import DatasetStatus, describe
from rosetta.datasets.paths import default_data_dir, resolve_data_dir
from rosetta.datasets.prepare import prepare_data
from rosetta.datasets.resnet_input import (
    iter_image_folder,
    load_image_folder,
    random_image_batch,
    random_image_batches,
)
from rosetta.datasets.synth_cifar10 import write_synthetic_cifar10
from rosetta.datasets.synth_imdb import write_synthetic_imdb
from rosetta.datasets.tarsafe import safe_extract

__all__ = [
    "Accepted",
    "accept",
    "prepare_data",
    "registry",
    "CIFAR10_ARCHIVE",
    "IMDB_ARCHIVE",
    "CifarData",
    "DatasetStatus",
    "ImdbData",
    "RemoteFile",
    "Verification",
    "default_data_dir",
    "describe",
    "epoch_order",
    "extract_cifar10",
    "fetch",
    "fetch_dataset",
    "iter_image_folder",
    "iterate_batches",
    "keras_sequences",
    "load_cifar10",
    "load_image_folder",
    "load_imdb",
    "num_batches",
    "random_image_batch",
    "random_image_batches",
    "resolve_data_dir",
    "safe_extract",
    "time_major",
    "write_synthetic_cifar10",
    "write_synthetic_imdb",
]
