"""The plugin's settings, stored by calibre in <config dir>/plugins/epub2audio.json. No Qt here,
so calibre's command line tools (and tests run with calibre-debug -e) can read them too."""

from calibre.utils.config import JSONConfig

prefs = JSONConfig('plugins/epub2audio')

# The epub2audio program to run (absolute path). Empty: look for it on PATH and in the usual
# install places (~/.local/bin, ~/.venvs/epub2audio/bin, pipx).
prefs.defaults['engine_path'] = ''
# The voice name passed as --voice; empty means the engine's own default (auto: the book's
# language decides, hibari for English).
prefs.defaults['voice'] = ''
# Only these chapters (epub2audio --chapters syntax, e.g. "1-3,7"); empty means the whole book.
prefs.defaults['chapters'] = ''
# Also save a copy of every finished audiobook in this folder; empty means do not.
prefs.defaults['copy_to_folder'] = ''
# Keep the engine's job folder (rendered segments) after a successful conversion.
prefs.defaults['keep_job_files'] = False
# How many books are converted at the same time (each engine uses the CPU fully).
prefs.defaults['max_concurrent'] = 1
# The read-along book (epub2audio --readalong: the EPUB with each sentence highlighted as it is read):
# '' = not made (default); 'epub' = it becomes the book's EPUB, the user's file kept as the format
# ORIGINAL_EPUB (calibre's own convention when it changes a book); 'folder' = saved in the
# "Also save to folder" folder beside the copy of the audiobook.
prefs.defaults['readalong'] = ''
# The audiobook's format (epub2audio --format): 'm4b' (default), 'mp3' or 'opus'; it is added to
# the book as the calibre format M4B, MP3 or OPUS.
prefs.defaults['format'] = 'm4b'
