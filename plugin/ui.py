"""The "Convert to audiobook" action: each selected book's EPUB → epub2audio → an M4B format.

Every book is one calibre job (Jobs panel: progress with time left, stoppable). The engine runs as
a separate process started by engine.run_engine inside a ThreadedJob; the calibre database is only
touched on the GUI thread: before the job (copy the EPUB, collect the metadata) and after it (add
the M4B, refresh the view).
"""

import os
import shutil
import threading

from qt.core import QMenu, QModelIndex

from calibre.constants import cache_dir
from calibre.gui2 import error_dialog
from calibre.gui2.actions import InterfaceAction
from calibre.gui2.threaded_jobs import ThreadedJob
from calibre.ptempfile import PersistentTemporaryDirectory

from calibre_plugins.epub2audio import engine
from calibre_plugins.epub2audio.prefs import prefs

PLUGIN_NAME = 'epub2audio'  # the InterfaceActionBase's name (for icon themes and the settings dialog)
JOB_TYPE = 'epub2audio'
PREVIEW_ACTION = 'Show what will be read…'
FORMAT = 'M4B'


def convert_book_job(spec, notifications=None, abort=None, log=None):
    """Runs in the job's thread: find the engine, run it, return the M4B path (or raise)."""
    env = engine.sanitized_env()
    exe = engine.find_engine(spec['engine_path'], env=env)
    cmd = engine.build_command(exe, spec['epub'], spec['output'], meta=spec['meta'], voice=spec['voice'],
                               chapters=spec['chapters'], work_dir=spec['work_dir'],
                               extra_args=(['--readalong'] if spec.get('readalong') else [])
                               + engine.format_args(spec.get('format')) or None)

    def notify(fraction, message):
        notifications.put((fraction, message))

    notify(0.0, 'starting epub2audio')
    try:
        result = engine.run_engine(cmd, notify=notify, abort=abort, log=log, env=env,
                                   on_start=spec.get('on_start'))
    except engine.EngineStopped:
        if abort is not None and abort.is_set():
            # Stopped from the Jobs list (or calibre is closing). calibre has already closed this
            # job's log; raising now would skip the callback, so end quietly: no result = stopped.
            return None
        raise
    return result.output


class ConvertToAudiobookAction(InterfaceAction):

    name = 'Convert to audiobook'
    action_spec = ('Convert to audiobook', None,
                   'Read the selected books aloud with epub2audio and add the M4B audiobook to them', None)
    action_type = 'current'
    dont_add_to = frozenset(['toolbar-device', 'context-menu-device', 'menubar-device'])

    def genesis(self):
        self.jobs = {}  # ThreadedJob → info dict
        self.processes = {}  # id(job spec) → running engine Popen
        self.lock = threading.Lock()
        icon = get_icons('images/icon.png', PLUGIN_NAME)  # noqa: F821 (injected by calibre)
        self.qaction.setIcon(icon)
        self.qaction.triggered.connect(self.convert_selected)
        self.menu = QMenu(self.gui)
        self.menu.addAction(icon, 'Convert selected books to audiobooks', self.convert_selected)
        self.menu.addAction(PREVIEW_ACTION, self.preview_selected)
        self.menu.addSeparator()
        self.menu.addAction('Settings…', self.show_settings)
        self.qaction.setMenu(self.menu)

    def apply_settings(self):
        pass  # settings are read when a conversion starts

    def show_settings(self):
        self.interface_action_base_plugin.do_user_config(self.gui)

    def location_selected(self, loc):
        self.qaction.setEnabled(loc == 'library')

    # --------------------------------------------------------------------------------------------
    # Starting conversions

    def convert_selected(self, *args):
        ids = list(self.gui.library_view.get_selected_ids())
        if not ids:
            return error_dialog(self.gui, 'No books selected',
                                'Select one or more books that have an EPUB, then convert them to audiobooks.',
                                show=True)
        db = self.gui.current_db.new_api
        with_epub = [i for i in ids if db.has_format(i, 'EPUB')]
        skipped = len(ids) - len(with_epub)
        if not with_epub:
            return error_dialog(self.gui, 'No EPUB',
                                'None of the selected books has an EPUB format. epub2audio reads EPUB files only; '
                                'convert the books to EPUB first.', show=True)
        started = []
        for book_id in with_epub:
            try:
                started.append(self.start_job(db, book_id))
            except Exception as err:
                import traceback
                error_dialog(self.gui, 'Could not start the audiobook conversion',
                             f'{db.field_for("title", book_id)}: {err}', det_msg=traceback.format_exc(), show=True)
        message = f'Converting {len(started)} book(s) to audiobooks'
        if skipped:
            message += f' ({skipped} without an EPUB skipped)'
        self.gui.status_bar.show_message(message, 5000)

    def preview_selected(self, *args):
        """The engine's plan of the current book (the first selected with an EPUB), read in a thread
        (a long book takes seconds) and shown in PreviewDialog; its Convert button starts the job."""
        db = self.gui.current_db.new_api
        ids = [i for i in self.gui.library_view.get_selected_ids() if db.has_format(i, 'EPUB')]
        if not ids:
            return error_dialog(self.gui, 'No EPUB selected',
                                'Select a book that has an EPUB format to see what epub2audio will read of it.',
                                show=True)
        book_id, title, library_id = ids[0], db.field_for('title', ids[0]) or 'Unknown', db.library_id
        tdir = PersistentTemporaryDirectory('_epub2audio_preview')
        epub = os.path.join(tdir, 'book.epub')
        db.copy_format_to(book_id, 'EPUB', epub)
        shown = self.Dispatcher(self.show_plan)
        chapters = prefs['chapters'] or ''

        def read():
            try:
                env = engine.sanitized_env()
                plan, error = engine.read_plan(engine.find_engine(prefs['engine_path'], env=env), epub, env=env), ''
            except Exception as err:
                plan, error = None, str(err)
            finally:
                shutil.rmtree(tdir, ignore_errors=True)
            shown(library_id, book_id, title, chapters, plan, error)

        self.gui.status_bar.show_message(f'Reading {title}…', 5000)
        threading.Thread(target=read, name='epub2audio preview', daemon=True).start()

    def show_plan(self, library_id, book_id, title, chapters, plan, error):
        if plan is None:
            return self.show_error('Could not read the book', f'{title}: {error}')
        from calibre_plugins.epub2audio.preview import PreviewDialog

        self.preview_dialog = dialog = PreviewDialog(self.gui, title, plan, chapters)
        dialog.accepted.connect(lambda: self.convert_previewed(library_id, book_id))
        dialog.setModal(False)  # calibre stays usable while it is open
        dialog.show()

    def convert_previewed(self, library_id, book_id):
        db = self.gui.current_db.new_api
        if db.library_id != library_id or not db.has_id(book_id) or not db.has_format(book_id, 'EPUB'):
            return self.show_error('Audiobook not started',
                                   'The library changed, or the book or its EPUB was removed, since the preview.')
        self.start_job(db, book_id)
        self.gui.status_bar.show_message('Converting 1 book to an audiobook', 5000)

    def start_job(self, db, book_id):
        title = db.field_for('title', book_id) or 'Unknown'
        library_id = db.library_id
        tdir = PersistentTemporaryDirectory('_epub2audio')
        epub = os.path.join(tdir, 'book.epub')
        db.copy_format_to(book_id, 'EPUB', epub)
        meta_path = engine.write_meta(self.collect_metadata(db, book_id, tdir), os.path.join(tdir, 'meta.json'))
        # A stable folder per book: the engine's job lives there, so stopping and converting again
        # resumes instead of starting over.
        job_home = os.path.join(cache_dir(), 'epub2audio', _safe_id(library_id), str(book_id))
        os.makedirs(job_home, exist_ok=True)
        fmt = engine.audio_format(prefs['format'])
        output = os.path.join(job_home, f'audiobook.{fmt}')
        spec = {
            'engine_path': prefs['engine_path'], 'voice': prefs['voice'], 'chapters': prefs['chapters'],
            'epub': epub, 'meta': meta_path, 'output': output, 'work_dir': os.path.join(job_home, 'job'),
            'readalong': prefs['readalong'] if prefs['readalong'] in engine.READALONG_CHOICES else '',
            'format': fmt,
        }
        key = id(spec)
        spec['on_start'] = lambda proc: self._register_process(key, proc)
        job = ThreadedJob(JOB_TYPE, f'Convert to audiobook: {title}', convert_book_job, (spec,), {},
                          self.Dispatcher(self.conversion_done),
                          max_concurrent_count=max(1, int(prefs['max_concurrent'] or 1)), killable=True)
        self.jobs[job] = {'book_id': book_id, 'title': title, 'library_id': library_id, 'tdir': tdir,
                          'job_home': job_home, 'key': key, 'authors': db.field_for('authors', book_id),
                          'readalong': spec['readalong']}
        self.gui.job_manager.run_threaded_job(job)
        return job

    def collect_metadata(self, db, book_id, tdir):
        """calibre's fields for --meta; calibre's placeholders ('Unknown') are left to the EPUB."""
        mi = db.get_metadata(book_id, get_cover=False)
        unknown = _('Unknown')  # noqa: F821 (calibre's builtin)
        title = mi.title if mi.title and mi.title != unknown else None
        authors = [a for a in (mi.authors or []) if a and a != unknown]
        language = None
        if mi.languages:
            try:
                from calibre.utils.localization import lang_as_iso639_1
                language = lang_as_iso639_1(mi.languages[0]) or mi.languages[0]
            except Exception:
                language = mi.languages[0]
        cover = None
        cover_path = os.path.join(tdir, 'cover.jpg')
        try:
            if db.copy_cover_to(book_id, cover_path):
                cover = cover_path
        except Exception:
            cover = None
        identifiers = mi.get_identifiers() if hasattr(mi, 'get_identifiers') else {}
        return engine.build_meta(
            title=title, authors=authors, language=language, date=mi.pubdate, description=mi.comments,
            publisher=mi.publisher, isbn=identifiers.get('isbn'), series=mi.series,
            series_index=mi.series_index, cover=cover)

    def _register_process(self, key, proc):
        with self.lock:
            self.processes[key] = proc

    # --------------------------------------------------------------------------------------------
    # Finishing (GUI thread, via Dispatcher)

    def conversion_done(self, job):
        info = self.jobs.pop(job, None)
        if info is None:
            return
        with self.lock:
            self.processes.pop(info['key'], None)
        shutil.rmtree(info['tdir'], ignore_errors=True)
        title = info['title']
        if job.killed or (not job.failed and not job.result):
            self.gui.status_bar.show_message(f'Audiobook for {title} stopped; convert it again to resume', 5000)
            return
        if job.failed:
            message = str(job.exception) if job.exception is not None else 'unknown error'
            self.gui.status_bar.show_message(f'Audiobook for {title} failed: {message}', 10000)
            self.gui.job_exception(job, dialog_title='Could not make the audiobook')
            return
        output = job.result
        db = self.gui.current_db.new_api
        if db.library_id != info['library_id'] or not db.has_id(info['book_id']):
            return self.show_error('Audiobook not added', (
                f'The library changed or the book {title} was deleted while it was being converted. '
                f'The audiobook was kept at {output}.'))
        try:
            # M4B, MP3 or OPUS: the format is the file's suffix, as calibre names formats
            db.add_format(info['book_id'], os.path.splitext(output)[1][1:].upper() or FORMAT, output, run_hooks=False)
        except Exception as err:
            import traceback
            return self.show_error('Audiobook not added', (
                f'Could not add the audiobook to {title}: {err}. It was kept at {output}.'),
                traceback.format_exc())
        notes = []
        folder = (prefs['copy_to_folder'] or '').strip()
        name = title
        if info['authors']:
            name = f'{title} - {" & ".join(info["authors"])}'
        if folder:
            try:
                notes.append('copied to ' + engine.copy_to_folder(output, folder, name))
            except Exception as err:
                notes.append(f'could not copy it to {folder}: {err}')
        if info.get('readalong'):
            notes += self.add_readalong(db, info, output, folder, name)
        if not prefs['keep_job_files']:
            shutil.rmtree(info['job_home'], ignore_errors=True)
            try:
                os.rmdir(os.path.dirname(info['job_home']))  # the library's folder, once it is empty
            except OSError:
                pass
        self.refresh_book(info['book_id'])
        self.gui.status_bar.show_message(
            f'Audiobook for {title} added' + (': ' + '; '.join(notes) if notes else ''), 5000)

    def add_readalong(self, db, info, output, folder, name):
        """The read-along book, as the settings say: the book's EPUB (the user's kept as
        ORIGINAL_EPUB) or a copy in the folder. Returns what happened, for the status bar."""
        made = engine.readalong_path(output)
        if not os.path.isfile(made):
            return ['no read-along book was made (see the job log)']
        book_id = info['book_id']
        try:
            for step, arg in engine.readalong_steps(info['readalong'], db.formats(book_id), folder):
                if step == 'add_format' and arg == 'ORIGINAL_EPUB':
                    original = os.path.join(info['job_home'], 'original.epub')
                    db.copy_format_to(book_id, 'EPUB', original)
                    db.add_format(book_id, 'ORIGINAL_EPUB', original, run_hooks=False)
                elif step == 'add_format':
                    db.add_format(book_id, arg, made, run_hooks=False)
                    return ['the read-along book is now its EPUB (the old one is ORIGINAL_EPUB)']
                elif step == 'copy':
                    return ['read-along book saved to ' + engine.copy_readalong_to_folder(made, arg, name)]
                else:
                    return ['read-along book not saved: set "Also save to folder" in the settings']
        except Exception as err:
            return [f'could not add the read-along book: {err}']
        return []

    def show_error(self, title, message, details=''):
        # Not modal: a job finishing must never block calibre.
        dialog = error_dialog(self.gui, title, message, det_msg=details, show=False)
        dialog.setModal(False)
        dialog.show()
        self._dialogs = [d for d in getattr(self, '_dialogs', []) if d.isVisible()] + [dialog]

    def refresh_book(self, book_id):
        try:
            self.gui.tags_view.recount()
        except Exception:
            pass
        if self.gui.current_view() is self.gui.library_view:
            view = self.gui.library_view
            view.model().refresh_ids((book_id,))
            current = view.currentIndex()
            if current.isValid():
                view.model().current_changed(current, QModelIndex())

    # --------------------------------------------------------------------------------------------
    # calibre is closing: no engine may outlive it

    def shutting_down(self):
        for job in list(self.jobs):
            abort = getattr(job, 'abort', None)
            if abort is not None:
                abort.set()
        with self.lock:
            procs = list(self.processes.values())
            self.processes.clear()
        engine.stop_all(procs, grace=3.0)
        return True


def _safe_id(text):
    return ''.join(ch if ch.isalnum() or ch in '-_' else '_' for ch in str(text)) or 'library'
