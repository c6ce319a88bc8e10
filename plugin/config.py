"""The settings page (Preferences → Plugins → epub2audio → Customize plugin)."""

import os

from qt.core import (QApplication, QCheckBox, QComboBox, QDesktopServices, QFileDialog, QFormLayout, QHBoxLayout,
                     QLabel, QLineEdit, QPushButton, Qt, QSpinBox, QUrl, QVBoxLayout, QWidget)

from calibre_plugins.epub2audio.prefs import prefs


class PathRow(QWidget):
    """A line edit with a Browse… button."""

    def __init__(self, text, placeholder, pick_folder, parent=None):
        super().__init__(parent)
        self.pick_folder = pick_folder
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.edit = QLineEdit(text, self)
        self.edit.setPlaceholderText(placeholder)
        self.edit.setClearButtonEnabled(True)
        layout.addWidget(self.edit, stretch=1)
        button = QPushButton('Browse…', self)
        button.clicked.connect(self.browse)
        layout.addWidget(button)

    def browse(self):
        start = os.path.dirname(self.text()) if self.text() else os.path.expanduser('~')
        if self.pick_folder:
            path = QFileDialog.getExistingDirectory(self, 'Choose a folder', self.text() or start)
        else:
            path, _filter = QFileDialog.getOpenFileName(self, 'Choose the epub2audio program', start)
        if path:
            self.edit.setText(os.path.normpath(path))

    def text(self):
        return self.edit.text().strip()


class ConfigWidget(QWidget):

    def __init__(self):
        super().__init__()
        layout = QVBoxLayout(self)
        intro = QLabel(
            'epub2audio reads each selected book\'s EPUB aloud on this computer and adds the result to the '
            'book as an M4B audiobook (with chapters and calibre\'s metadata and cover). A conversion can be '
            'stopped in the Jobs list; converting the book again resumes it.', self)
        intro.setWordWrap(True)
        layout.addWidget(intro)
        form = QFormLayout()
        layout.addLayout(form)

        self.engine_path = PathRow(prefs['engine_path'], 'search PATH, ~/.local/bin and ~/.venvs/epub2audio/bin',
                                   pick_folder=False, parent=self)
        self.engine_path.setToolTip('The epub2audio program, e.g. ~/.venvs/epub2audio/bin/epub2audio')
        form.addRow('epub2audio &program:', self.engine_path)

        # An editable dropdown of the voices `epub2audio voice list` names here, in its order (the
        # default English voice first); any other name can still be typed.
        self.voice = QComboBox(self)
        self.voice.setEditable(True)
        self.voice.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.fill_voices(prefs['voice'])
        self.engine_path.edit.editingFinished.connect(lambda: self.fill_voices(self.voice_name()))
        self.voice.setToolTip('The voice name passed to epub2audio --voice: auto (default: hibari for English), '
                              'joe, kokoro:af_heart (about 65 times slower than hibari), piper:NAME, ... '
                              '(`epub2audio voice list` shows them; "tone" is a quick test voice)')
        voice_row = QHBoxLayout()
        voice_row.addWidget(self.voice, 1)
        self.try_button = QPushButton('&Try voice', self)
        self.try_button.setToolTip('Hear a short sample of this voice (epub2audio voice try)')
        self.try_button.clicked.connect(self.try_voice)
        voice_row.addWidget(self.try_button)
        form.addRow('&Voice:', voice_row)

        self.chapters = QLineEdit(prefs['chapters'], self)
        self.chapters.setPlaceholderText('all chapters')
        self.chapters.setToolTip('Only these chapters, e.g. 1-3,7 (numbers as shown by epub2audio --list-chapters)')
        form.addRow('&Chapters:', self.chapters)

        self.copy_to_folder = PathRow(prefs['copy_to_folder'], 'do not copy', pick_folder=True, parent=self)
        self.copy_to_folder.setToolTip('Also save a copy of each finished audiobook in this folder')
        form.addRow('Also save &to folder:', self.copy_to_folder)

        self.audio_format = QComboBox(self)
        for label, value in (('M4B (chapters in Apple Books, BookPlayer, Audiobookshelf, ...)', 'm4b'),
                             ('MP3 (ID3 chapters)', 'mp3'), ('Opus (smallest; Ogg chapters)', 'opus')):
            self.audio_format.addItem(label, value)
        self.audio_format.setCurrentIndex(max(0, self.audio_format.findData(prefs['format'] or 'm4b')))
        self.audio_format.setToolTip('The audiobook\'s format (epub2audio --format): the same chapters, tags, '
                                     'cover and loudness in each; it is added to the book as M4B, MP3 or OPUS')
        form.addRow('Audiobook &format:', self.audio_format)

        self.readalong = QComboBox(self)
        for label, value in (('no', ''), ('yes, as the book\'s EPUB (the old one kept as ORIGINAL_EPUB)', 'epub'),
                             ('yes, saved in the folder above', 'folder')):
            self.readalong.addItem(label, value)
        self.readalong.setCurrentIndex(max(0, self.readalong.findData(prefs['readalong'] or '')))
        self.readalong.setToolTip('Also make a read-along EPUB: the book with each sentence highlighted as it '
                                  'is read (EPUB 3 media overlays; calibre\'s viewer plays them)')
        form.addRow('&Read-along book:', self.readalong)

        self.max_concurrent = QSpinBox(self)
        self.max_concurrent.setRange(1, 8)
        self.max_concurrent.setValue(int(prefs['max_concurrent'] or 1))
        self.max_concurrent.setToolTip('Books converted at the same time; each conversion keeps the CPU busy')
        form.addRow('Books at the &same time:', self.max_concurrent)

        self.keep_job_files = QCheckBox('&Keep the rendered speech after a conversion (uses disk space)', self)
        self.keep_job_files.setChecked(bool(prefs['keep_job_files']))
        layout.addWidget(self.keep_job_files)
        layout.addStretch(1)

    def try_voice(self):
        import tempfile

        from calibre.gui2 import error_dialog
        from calibre_plugins.epub2audio.engine import EngineError, find_engine, try_voice

        voice = self.voice_name()
        if voice == 'auto':
            voice = ''  # a sample has no book: the voice an English book gets
        try:
            engine = find_engine(self.engine_path.text())
        except EngineError as error:
            error_dialog(self, 'epub2audio not found', str(error), show=True)
            return
        wav = os.path.join(tempfile.mkdtemp(prefix='epub2audio-try-'), 'sample.wav')
        self.try_button.setEnabled(False)
        QApplication.setOverrideCursor(Qt.CursorShape.WaitCursor)
        try:
            ok, message = try_voice(engine, voice, wav)
        finally:
            QApplication.restoreOverrideCursor()
            self.try_button.setEnabled(True)
        if not ok:
            error_dialog(self, 'No voice sample', message, show=True)
            return
        self.try_button.setToolTip(message)
        QDesktopServices.openUrl(QUrl.fromLocalFile(wav))  # the system's player

    def fill_voices(self, chosen):
        from calibre_plugins.epub2audio.engine import EngineError, find_engine, list_voices, voice_choices

        try:
            listed = list_voices(find_engine(self.engine_path.text()))
        except EngineError:
            listed = []
        self.voice.clear()
        for label, value in voice_choices(listed, chosen):
            self.voice.addItem(label, value)
        chosen = (chosen or '').strip()
        self.voice.setCurrentIndex(max(0, self.voice.findData('' if chosen == 'auto' else chosen)))

    def voice_name(self):
        """The --voice value: a listed row's, or the name typed into the box."""
        text = self.voice.currentText().strip()
        index = self.voice.findText(text)
        return self.voice.itemData(index) if index >= 0 else text

    def validate(self):
        path = self.engine_path.text()
        if path and not os.path.isfile(os.path.expanduser(path)):
            from calibre.gui2 import error_dialog
            error_dialog(self, 'epub2audio not found', f'There is no file at {path}.', show=True)
            return False
        return True

    def save_settings(self):
        prefs['engine_path'] = self.engine_path.text()
        prefs['voice'] = self.voice_name()
        prefs['chapters'] = ''.join(self.chapters.text().split())
        prefs['copy_to_folder'] = self.copy_to_folder.text()
        prefs['max_concurrent'] = int(self.max_concurrent.value())
        prefs['keep_job_files'] = bool(self.keep_job_files.isChecked())
        prefs['readalong'] = self.readalong.currentData() or ''
        prefs['format'] = self.audio_format.currentData() or 'm4b'
