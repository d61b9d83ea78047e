"""Errors caused by the user's input (config, corpus, question files): reported in one line, no traceback."""

from __future__ import annotations

from fixgraph.config import ConfigError
from fixgraph.corpus.connectors.git_history import GitError
from fixgraph.corpus.debian import FetchError
from fixgraph.corpus.mallard import MallardError
from fixgraph.corpus.sources import EmptyCorpusError, MissingCorpusError
from fixgraph.evaluation.agreement import AgreementError, LabelFileError
from fixgraph.evaluation.gold import GoldCoverageError
from fixgraph.evaluation.protocol_errors import PROTOCOL_ERRORS
from fixgraph.evaluation.questions import QuestionFileError
from fixgraph.llm.gguf import ModelAssemblyError
from fixgraph.modelpaths import ModelNotFoundError
from fixgraph.registry import UnknownOptionError

USER_ERRORS: tuple[type[BaseException], ...] = (
    ConfigError,
    FetchError,
    GitError,
    MallardError,
    MissingCorpusError,
    EmptyCorpusError,
    GoldCoverageError,
    AgreementError,
    LabelFileError,
    QuestionFileError,
    ModelNotFoundError,
    ModelAssemblyError,  # a GGUF model not assembled, unknown or failing its checksum: the message says what to run
    UnknownOptionError,
    FileNotFoundError,
    KeyError,
    *PROTOCOL_ERRORS,
)
