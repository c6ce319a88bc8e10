"""The "Show what will be read…" dialog: the engine's plan of one book (engine.read_plan), so a user
sees which chapters are read and which parts are skipped, each with its first words, before hours
of audio are made. Convert starts the conversion as the toolbar button does."""

from qt.core import (QDialog, QDialogButtonBox, QHeaderView, QLabel, QTreeWidget, QTreeWidgetItem, QVBoxLayout)

from calibre_plugins.epub2audio import engine

COLUMNS = ('#', 'Title', 'Read or skipped', 'First words')


class PreviewDialog(QDialog):

    def __init__(self, parent, title, plan, chapters=''):
        QDialog.__init__(self, parent)
        self.setWindowTitle(f'What epub2audio will read: {title}')
        self.rows = engine.plan_rows(plan)
        self.summary = engine.plan_summary(plan, chapters)
        layout = QVBoxLayout(self)
        label = QLabel('\n'.join(self.summary), self)
        label.setWordWrap(True)
        layout.addWidget(label)
        self.table = QTreeWidget(self)
        self.table.setRootIsDecorated(False)
        self.table.setHeaderLabels(list(COLUMNS))
        for row in self.rows:
            item = QTreeWidgetItem(list(row))
            item.setToolTip(3, row[3])
            self.table.addTopLevelItem(item)
        header = self.table.header()
        for column in range(len(COLUMNS) - 1):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        layout.addWidget(self.table)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.addButton('Convert to audiobook', QDialogButtonBox.ButtonRole.AcceptRole)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
        self.resize(900, 560)
