"""Preprocessors that turn four public datasets into verl's RL parquet format.

One command per dataset, all with verl's flag names::

    python -m data_prep.gsm8k   --local_save_dir DIR [--local_dataset_path PATH] [--strict]
    python -m data_prep.math    --local_save_dir DIR [--local_dataset_path PATH] [--strict]
    python -m data_prep.guru    --local_save_dir DIR [--local_dataset_path PATH] [--test_size N] [--seed S]
    python -m data_prep.toolace --local_save_dir DIR [--local_dataset_path PATH] [--multi_turn] ...

Each writes ``DIR/train.parquet`` and ``DIR/test.parquet`` whose ``data_source`` values are understood by
:func:`verl_ext.rewards.compute_score`. The shared machinery lives in :mod:`data_prep.raw_records`
(reading raw files), :mod:`data_prep.split_report` (the skip/count report), :mod:`data_prep.verl_rows`
(verl's row schema and the parquet writer) and :mod:`data_prep.command` (flags and the conversion loop).
"""
