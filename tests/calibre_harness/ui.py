"""The harness action: select the book, trigger "Convert to audiobook", wait for the jobs, write a
JSON report, quit calibre. Controlled by environment variables:

EPUB2AUDIO_HARNESS_OUT      where to write the report (unset: the harness does nothing)
EPUB2AUDIO_HARNESS_BOOKS    comma-separated book ids to select (default: all books)
EPUB2AUDIO_HARNESS_TIMEOUT  seconds to wait for the jobs (default 240)
EPUB2AUDIO_HARNESS_MODE     "convert" (default); "quit-while-running": quit calibre as soon as the
                            engine runs (closing calibre must stop it); "kill-while-running": stop
                            the job as the Jobs list does, once the engine runs; "preview":
                            "Show what will be read…" from the action's menu, the dialog's title,
                            summary and rows in the report, then its Convert button
"""

import json
import os
import time
import traceback

from qt.core import QTimer

from calibre.gui2.actions import InterfaceAction

ACTION = 'Convert to audiobook'
PREVIEW = 'Show what will be read…'


class HarnessAction(InterfaceAction):
    name = 'epub2audio test harness'
    action_spec = ('epub2audio test harness', None, None, None)
    dont_add_to = InterfaceAction.all_locations  # invisible: tests only

    def genesis(self):
        self.out = os.environ.get('EPUB2AUDIO_HARNESS_OUT')
        self.report = {'harness_loaded': True}

    def initialization_complete(self):
        if self.out:
            QTimer.singleShot(300, self.start)

    def start(self):
        try:
            report = self.report
            report['mode'] = mode = os.environ.get('EPUB2AUDIO_HARNESS_MODE', 'convert')
            report['action_loaded'] = ACTION in self.gui.iactions
            db = self.gui.current_db.new_api
            report['books'] = sorted(db.all_book_ids())
            if not report['action_loaded']:
                return self.finish()
            wanted = os.environ.get('EPUB2AUDIO_HARNESS_BOOKS')
            view = self.gui.library_view
            if wanted:
                view.select_rows([int(x) for x in wanted.split(',')])
            else:
                view.selectAll()
            report['selected'] = sorted(view.get_selected_ids())
            action = self.gui.iactions[ACTION]
            report['action_text'] = action.qaction.text()
            report['action_icon'] = not action.qaction.icon().isNull()
            self.jobs_before = set(self.gui.job_manager.jobs)
            self.deadline = time.monotonic() + float(os.environ.get('EPUB2AUDIO_HARNESS_TIMEOUT', '240'))
            if mode == 'preview':
                [entry] = [a for a in action.menu.actions() if a.text() == PREVIEW]
                entry.trigger()
                self.settle = 0
                return QTimer.singleShot(200, self.when_previewed)
            action.qaction.trigger()
            self.settle = 0
            first = {'quit-while-running': self.quit_when_running, 'kill-while-running': self.kill_when_running}
            QTimer.singleShot(200, first.get(mode, self.poll))
        except Exception:
            self.report['error'] = traceback.format_exc()
            self.finish()

    def our_jobs(self):
        return [j for j in self.gui.job_manager.jobs if j not in self.jobs_before]

    def poll(self):
        try:
            jobs = self.our_jobs()
            action = self.gui.iactions[ACTION]
            done = bool(jobs) and all(j.is_finished for j in jobs) and not action.jobs  # callbacks ran too
            if done:
                self.settle += 1  # let the Dispatcher callback run on the GUI thread
            if self.settle >= 5 or time.monotonic() > self.deadline:
                self.report['timed_out'] = not done
                return self.finish()
            QTimer.singleShot(200, self.poll)
        except Exception:
            self.report['error'] = traceback.format_exc()
            self.finish()

    def when_previewed(self):
        """Once the preview dialog is up: its contents in the report, then its Convert button."""
        try:
            dialog = getattr(self.gui.iactions[ACTION], 'preview_dialog', None)
            if dialog is None or not dialog.isVisible():
                if time.monotonic() > self.deadline:
                    self.report['timed_out'] = True
                    return self.finish()
                return QTimer.singleShot(200, self.when_previewed)
            self.report['preview'] = {'window_title': dialog.windowTitle(), 'summary': dialog.summary,
                                      'rows': [[dialog.table.topLevelItem(i).text(c) for c in range(4)]
                                               for i in range(dialog.table.topLevelItemCount())]}
            dialog.accept()
            QTimer.singleShot(200, self.poll)
        except Exception:
            self.report['error'] = traceback.format_exc()
            self.finish()

    def when_running(self, then):
        """Poll until the engine process runs (or time is up), record its pids, then `then()`."""
        action = self.gui.iactions[ACTION]
        with action.lock:
            pids = [p.pid for p in action.processes.values()]
        # The test names a file the engine writes once it is up (its pids): wait for it, not for a while.
        ready = os.environ.get('EPUB2AUDIO_HARNESS_READY_FILE')
        if (pids and (not ready or os.path.exists(ready))) or time.monotonic() > self.deadline:
            self.report['engine_pids'] = pids
            return then()
        QTimer.singleShot(100, lambda: self.when_running(then))

    def quit_when_running(self):
        self.when_running(self.finish)

    def kill_when_running(self):
        def stop_our_jobs():
            for job in self.our_jobs():
                self.gui.job_manager.threaded_server.kill_job(job)  # what the Jobs list's Stop does
            QTimer.singleShot(200, self.poll)
        self.when_running(stop_our_jobs)

    def finish(self):
        report = self.report
        try:
            db = self.gui.current_db.new_api
            report['formats'] = {str(i): sorted(db.formats(i) or ()) for i in db.all_book_ids()}
            report['m4b_paths'] = {str(i): db.format_abspath(i, 'M4B') for i in db.all_book_ids()
                                   if db.has_format(i, 'M4B')}
            jobs = []
            for job in self.our_jobs() if hasattr(self, 'jobs_before') else []:
                try:
                    details = job.details
                except Exception:
                    details = ''
                jobs.append({
                    'description': job.description, 'failed': bool(job.failed), 'killed': bool(job.killed),
                    'finished': bool(job.is_finished), 'percent': job.percent,
                    'exception': None if job.exception is None else str(job.exception),
                    'exception_type': None if job.exception is None else type(job.exception).__name__,
                    'details_tail': (details or '')[-3000:],
                })
            report['jobs'] = jobs
            action = self.gui.iactions.get(ACTION)
            if action is not None:
                report['plugin_jobs_pending'] = len(action.jobs)  # 0 once every callback ran
        except Exception:
            report['finish_error'] = traceback.format_exc()
        with open(self.out + '.tmp', 'w', encoding='utf-8') as f:
            json.dump(report, f, indent=2, default=str)
        os.replace(self.out + '.tmp', self.out)
        self.gui.quit(confirm_quit=False)
