"""The exceptions genobird raises for problems a user can fix.

Each subclasses the built-in a caller would naturally catch (ValueError for bad values,
KeyError for unknown names, OSError for files and downloads), so code that does not know
genobird still handles them. Messages name the bad value, where it was, and what to do;
the command line prints them as one line, never a traceback.
"""

from __future__ import annotations


class GenobirdError(Exception):
    """Base class of every error genobird raises for a user-fixable problem."""

    def __str__(self) -> str:
        # KeyError's own __str__ would print repr(message) with quotes; keep messages plain.
        return str(self.args[0]) if self.args else ""


class InputError(GenobirdError, ValueError):
    """A value or record in the user's input is invalid."""


class SequenceError(InputError):
    """DNA with a character that is neither a base nor an IUPAC ambiguity code."""


class RegionError(InputError):
    """A genomic interval that is malformed or does not fit its contig."""


class FormatError(InputError):
    """A file whose content does not follow the format it claims (BED, FASTA, VCF, ...)."""


class ConfigError(InputError):
    """A configuration value that is missing, of the wrong type or out of range."""


class UsageError(ConfigError):
    """A command line missing what it needs; the command exits 2, as argparse does."""


class CheckpointError(InputError):
    """A model directory or checkpoint that is incomplete, corrupted or mismatched."""


class ContigError(GenobirdError, KeyError):
    """A contig name that the reference does not contain, even after aliasing."""


class ReferenceFileError(GenobirdError, OSError):
    """A FASTA or its index that cannot be read, built or trusted."""


class DownloadError(GenobirdError, OSError):
    """A download that failed or could not be verified."""


class ChecksumError(DownloadError):
    """A downloaded file whose checksum differs from the expected one."""
