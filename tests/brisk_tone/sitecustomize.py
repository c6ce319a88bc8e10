"""On PYTHONPATH, this makes the test tone of a test's `epub2audio` process (and of its workers)
speak ten times faster: the read-along sweep (tests/test_readalong_corpus.py) checks the read-along
book's markup, which the text decides, and most of its time went to encoding the tone's audio
(Die Verwandlung's shortest chapter was 46 minutes of it, encoded twice). The other pieces stay:
each segment still lasts (3 + characters) / pace seconds, so no clip is empty, and the pauses
between segments are the book's. A different sound, so a different model id."""

import dataclasses

from epub2audio.voices import tone

BRISK = 10
tone.CHARACTERS_PER_SECOND = 14 * BRISK
tone.ToneVoice.info = dataclasses.replace(tone.ToneVoice.info, model_id=f"{tone.ToneVoice.info.model_id}-brisk{BRISK}")
