"""Errors the front doors turn into exit codes and one-line messages."""


class InputError(Exception):
    """The user's input is unusable (a broken EPUB, a bad option). Exit code 2, no traceback."""


class JobFailed(Exception):
    """A conversion could not finish (a segment kept failing). Exit code 1; the job stays resumable."""
