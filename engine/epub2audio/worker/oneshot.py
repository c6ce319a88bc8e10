"""The child side of a one-shot job that the parent runs with voices/catalog.py's `_run_child`
(`voice add`, `model compress`): the request is JSON in argv[1], the answer one JSON line on
stdout, so the command itself never imports torch or onnxruntime."""

from __future__ import annotations

import json
import sys
from typing import Callable

from ..errors import InputError


def run(work: Callable[[dict], dict]) -> int:
    """{"ok": true, **work(request)}; a bad input is exit 2, anything else exit 1, one line each."""
    request = json.loads(sys.argv[1])
    try:
        result = work(request)
    except InputError as error:
        print(json.dumps({"ok": False, "message": str(error), "exit_code": 2}))
        return 2
    except Exception as error:  # reported as one line by the parent
        print(json.dumps({"ok": False, "message": f"{type(error).__name__}: {error}", "exit_code": 1}))
        return 1
    print(json.dumps({"ok": True, **result}))
    return 0
