"""What a listener wants of every part of every corpus book: plain data for bench/coverage.py.

A part is what bench/corpus_parts.py finds without our reading rules: a TOC entry's own text (from
its anchor to the next anchor in spine order), a spine file's text before any anchor, or
Project Gutenberg's header ("PG header") and licence ("PG footer"). Each gets one class:

- "read": real content (chapters, prefaces, introductions, afterwords, endnotes sections, the
  author's dedication and epigraph);
- "skip:<kind>": front or back matter an audiobook leaves out (title page, half-title, imprint,
  copyright, colophon, licence, contents, list, index, transcriber's note, credits, cover, ...);
- "either": a defensible call both ways (reading it and skipping it are both right).

Taken from shared/corpus/EXPECTED.md where it has an entry (the additional set), elsewhere from
reading the book, never from what the code does. Per book: "default" is the class of every TOC
entry not named; "toc" names entries by their label (every entry with that label) or by "#N", the
entry's position in the TOC (0-based); "within" (optional) classes strings inside parts on
their own, such as a note's back-link "( return )" or a producer's credit atop the text, which a
listener does not want read even inside a chapter ("class:NAME": the text of every element of
that class); "outside" names every part no TOC entry owns (spine files
by path, "PG header", "PG footer"), and must name them all (tests/test_coverage.py checks it).
"""

PG = {"PG header": "skip:licence", "PG footer": "skip:licence"}

# Standard Ebooks' own front and back matter, the same in every book of theirs.
SE = {"Titlepage": "skip:title page", "Imprint": "skip:imprint", "Colophon": "skip:colophon",
      "Uncopyright": "skip:licence"}


# The heading of Standard Ebooks' notes section: with every note read where it is cited, the
# heading over nothing may go (bench/coverage.py reads the books with --notes inline).
SE_WITHIN = {"Endnotes": "either"}


def se(half_title, notes=False, **toc):
    """A Standard Ebooks book: its matter skipped, its half-title (the book's name) skipped too;
    `notes`: it has an endnotes section."""
    return {"default": "read", "toc": {**SE, half_title: "skip:half-title", **toc},
            "within": SE_WITHIN if notes else {}, "outside": {}}


LABELS = {
    # -- the first set ------------------------------------------------------------------------
    "moby-dick-epub3.epub": {
        "default": "read",
        # The first entry's text is the "Brief Contents" page and the title page.
        "toc": {"Moby-Dick": "skip:contents", "Original Transcriber’s Notes:": "skip:transcriber's note",
                "Copyright Page": "skip:copyright"},
        "outside": {},
    },
    "a-tale-of-two-cities-nested-books-se-epub3.epub": se("A Tale of Two Cities"),
    "the-waste-land-poetry-notes-epub3.epub": {
        "default": "read", "toc": {},
        # Title, author, the epigraph and the dedication, in one titlepage section: the epigraph and
        # dedication are the author's, so either.
        "outside": {"EPUB/wasteland-content.xhtml": "either"},
    },
    "georgia-britannica-pls-ssml-epub3.epub": {
        "default": "read", "toc": {},
        # The editor's correction, in an annotation <aside> beside the word it corrects.
        "within": {"amended from overriden": "skip:transcriber's note"}, "outside": {},
    },
    "childrens-literature-unlinked-toc-long-section-epub3.epub": {
        "default": "read",
        # The section's own annotated reading list.
        "toc": {"BIBLIOGRAPHY": "either"},
        # The transcriber's corrections, each in an annotation <aside>.
        "within": {"Transcriber's Note: original reads 'Emporer's'": "skip:transcriber's note",
                   "Transcriber's Note: original reads 'warrier'": "skip:transcriber's note",
                   "Transcriber's Note: original reads 'Dyrad'": "skip:transcriber's note"},
        "outside": {"EPUB/nav.xhtml": "skip:contents"},
    },
    "hamlet-drama-tables-se-epub3.epub": se("Hamlet", notes=True, **{"Dramatis Personae": "either"}),
    "vingt-mille-lieues-sous-les-mers-fr-epub2-ncx.epub": {
        "default": "read",
        "toc": {"VINGT MILLE LIEUES SOUS LES MERS": "skip:title page", "TABLE DES MATIÈRES.": "skip:contents",
                "Au lecteur.": "skip:transcriber's note", "Corrections.": "skip:transcriber's note"},
        # The link under each picture's caption to its larger copy (ebookmaker left it no href).
        "within": {"Agrandir": "skip:navigation"},
        "outside": {**PG, "OEBPS/@public@vhost@g@gutenberg@html@files@54873@54873-h@54873-h-0.htm.html":
                    "skip:contents"},
    },
    "alice-under-ground-facsimile-images-epub2-ncx.epub": {
        "default": "read",
        "toc": {"ALICE'S ADVENTURES UNDER GROUND": "skip:title page", "#1": "skip:title page",
                "#2": "skip:title page", "LEWIS CARROLL": "skip:title page", "#4": "skip:title page",
                "#5": "skip:title page", "#6": "skip:title page", "#7": "skip:title page",
                "#8": "skip:title page", "#9": "skip:title page", "CONTENTS.": "skip:contents",
                # Carroll's own Christmas greeting is read; the publisher's lists of his works are adverts.
                "WORKS BY LEWIS CARROLL.": "skip:advert"},
        "outside": {**PG, "OEBPS/@public@vhost@g@gutenberg@html@files@19002@19002-h@19002-h-0.htm.html":
                    "skip:transcriber's note"},
    },
    "regime-anticancer-arabic-rtl-epub3.epub": {
        "default": "read", "toc": {"Couverture": "skip:cover", "Page de titre": "skip:title page"},
        "outside": {},
    },
    "laozi-daodejing-zh-epub2-ncx.epub": {
        # Every NCX entry is in the licence; the text is in the spine file before them.
        "default": "skip:licence", "toc": {},
        "within": {"Produced by Yu Hsiu Hung": "skip:credits",
                   "End of the Project Gutenberg EBook of Lao Zih, by Er Li": "skip:licence"},
        "outside": {**PG, "OEBPS/7707970969783376317_24039-0-0.txt.html": "read"},
    },
    "herodotus-vol1-split-chapters-footnotes-epub2-ncx.epub": {
        "default": "read",
        "toc": {"#0": "skip:title page", "Translated into English by G. C. Macaulay": "skip:title page",
                "IN TWO VOLUMES VOL. I": "skip:title page", "Contents": "skip:contents",
                "#6": "skip:half-title"},
        "within": {"( return )": "skip:navigation"},
        "outside": PG,
    },
    # -- batch 2 ------------------------------------------------------------------------------
    "die-verwandlung-de-pg-ebookmaker-0-12-boilerplate-epub3.epub": {
        "default": "read",
        "toc": {"DIE VERWANDLUNG": "skip:title page", "THE FULL PROJECT GUTENBERG LICENSE": "skip:licence"},
        "outside": PG,
    },
    "don-quijote-es-pg-long-novel-epub3.epub": {
        "default": "read",
        # The title twice and the author line; the licence. The royal privilege, the tasa and the
        # errata testimony are the first edition's own preliminaries, printed as part of the book.
        "toc": {"#0": "skip:title page", "#1": "skip:title page", "#2": "skip:title page",
                "TASA": "either", "TESTIMONIO DE LAS ERRATAS": "either", "EL REY": "either",
                "THE FULL PROJECT GUTENBERG LICENSE": "skip:licence"},
        "outside": PG,
    },
    "la-raza-descubridores-es-pg-ebookmaker-0-12-nonlinear-backlink-epub2-ncx.epub": {
        "default": "read",
        # The header entry's own text is the book's rights page; "LA RAZA" is the title page.
        "toc": {"#0": "skip:copyright", "LA RAZA": "skip:title page",
                "THE FULL PROJECT GUTENBERG LICENSE": "skip:licence"},
        "outside": PG,
    },
    "kumon-no-ran-ja-horizontal-pg-epub3.epub": {
        "default": "read",
        # Title and author lines; the translator's afterword is a note on his source edition.
        "toc": {"苦悶の欄": "skip:title page", "アール・デア・ビガーズ": "either", "翻訳後記": "either",
                "THE FULL PROJECT GUTENBERG LICENSE": "skip:licence"},
        "outside": {**PG, "OEBPS/4874984828684029611_39287-h-0.htm.xhtml": "skip:credits"},
    },
    "a-dogs-tale-pg-epubmaker-0-3-pginternal-epub2-ncx.epub": {
        "default": "read",
        # A note on the original HTML file, two title pages, the list of illustrations and the
        # book's own contents list (three linked headings).
        "toc": {"A DOG'S TALE, By Mark Twain": "skip:transcriber's note", "A DOG'S TALE": "skip:title page",
                "Frontpiece": "skip:list", "Chapter I.": "skip:contents", "Chapter II.": "skip:contents",
                "Chapter III.": "skip:contents"},
        "outside": PG,
    },
    "struwwelpeter-picture-book-alt-text-pg-epub3.epub": {
        "default": "read",
        "toc": {"STRUWWELPETER": "skip:title page", "MERRY STORIES AND FUNNY PICTURES": "skip:title page",
                "Heinrich Hoffman": "skip:title page", "FREDERICK WARNE & CO., INC. NEW YORK": "skip:title page",
                "CONTENTS": "skip:contents", "THE FULL PROJECT GUTENBERG LICENSE": "skip:licence"},
        "outside": {**PG, "OEBPS/6818393666006366538_12116-h-0.htm.xhtml": "skip:transcriber's note"},
    },
    "a-tiny-seed-picture-book-descriptive-alt-bookdash-epub2.epub": {
        # One entry: the story, with Book Dash's credits and licence block at its end (not split here).
        "default": "read", "toc": {}, "outside": {},
    },
    "intlanzi-kunye-nesipho-xhosa-picture-book-lang-mismatch-bookdash-epub2.epub": {
        "default": "read", "toc": {}, "outside": {},
    },
    "importance-of-being-earnest-play-dramatis-personae-se-epub3.epub": se(
        "The Importance of Being Earnest", **{"Dramatis Personae": "either", "The Scenes of the Play": "either"}),
    "dubliners-short-story-collection-se-epub3.epub": {"default": "read", "toc": SE, "outside": {}},
    "the-prince-nonfiction-endnotes-dedication-se-epub3.epub": se("The Prince", notes=True),
    "yeats-poetry-collection-sections-se-epub3.epub": {"default": "read", "toc": SE, "within": SE_WITHIN, "outside": {}},
    # -- the additional set (EXPECTED.md) -----------------------------------------------------
    "crime-and-punishment-parts-epilogue-se-epub3.epub": se("Crime and Punishment", notes=True),
    "sherlock-holmes-adventures-short-stories-se-epub3.epub": {"default": "read", "toc": SE, "outside": {}},
    "leaves-of-grass-poetry-718-toc-se-epub3.epub": se("Leaves of Grass", notes=True),
    "art-of-war-giles-huge-endnotes-se-epub3.epub": se("The Art of War", notes=True, Bibliography="either"),
    "pygmalion-play-preface-sequel-se-epub3.epub": se("Pygmalion", notes=True),
    "rubaiyat-fitzgerald-preface-quatrains-se-epub3.epub": se("The Rubáiyát of Omar Khayyám"),
    "frankenstein-letters-intro-dedication-se-epub3.epub": se("Frankenstein", notes=True),
    "devils-dictionary-letter-chapters-se-epub3.epub": se("The Devil’s Dictionary"),
    "divine-comedy-longfellow-endnotes-se-epub3.epub": se("The Divine Comedy", notes=True),
    "linear-algebra-mathml-tables-epub3.epub": {
        "default": "read",
        # DITA's link bars under every topic (its child topics, then "Parent topic: … Previous topic:
        # … Next topic: …"): navigation, not text (EXPECTED.md).
        # and the rights line atop every section (EXPECTED.md: an ideal reader drops both).
        "within": {"class:related-links": "skip:navigation",
                   "From A First Course in Linear Algebra Version 2.30 © 2004. Licensed under the GNU Free "
                   "Documentation License . http://linear.ups.edu/": "skip:licence"},
        "toc": {"A First Course in Linear Algebra": "skip:title page", "Copyright": "skip:copyright",
                "Edition": "skip:imprint", "Publisher": "skip:imprint", "Table of Contents": "skip:contents",
                "Chapter 1. Theorems": "skip:list", "Chapter 2. Notation": "skip:list",
                "Chapter 3. Diagrams": "skip:list", "Chapter 4. Examples": "skip:list",
                "Chapter 12. Appendix GFDL GNU Free Documentation License": "skip:licence",
                "Chapter 22. Definitions": "skip:list",
                "Author Biography": "either", "Chapter 21. Contributors": "either"},
        "outside": {},
    },
    "epub30-spec-deep-toc-tables-epub3.epub": {
        "default": "read",
        # Each of the six documents' own entry holds its title and its header (version URLs, the
        # copyright notice, editors, the document's own contents): EXPECTED.md reads the entries and
        # would drop the header, so either.
        "toc": {"EPUB 3.0 Specification": "skip:title page",
                "EPUB 3 Specifications - Table of Contents": "skip:contents",
                **{doc: "either" for doc in ("EPUB 3 Overview", "EPUB Publications 3.0", "EPUB Content Documents 3.0",
                                             "EPUB Media Overlays 3.0", "EPUB Open Container Format (OCF) 3.0",
                                             "EPUB 3 Changes from EPUB 2.0.1")},
                "Terminology": "either", "Acknowledgements and Contributors": "either", "References": "either"},
        "outside": {},
    },
    "israel-sailing-he-rtl-epub3.epub": {
        "default": "read", "toc": {"דף פתיחה": "skip:cover", "זכויות יוצרים": "skip:copyright"}, "outside": {},
    },
    "kusamakura-ja-vertical-ruby-epub3.epub": {
        "default": "read", "toc": {"この文書について": "skip:credits"},
        "outside": {"OPS/xhtml/表紙.xhtml": "skip:cover"},
    },
    "cole-voyage-of-life-mixed-fixed-layout-epub3.epub": {"default": "read", "toc": {}, "outside": {}},
    "page-blanche-fr-comic-fixed-layout-no-text-epub3.epub": {"default": "either", "toc": {}, "outside": {}},
    "jekyll-hyde-pg-ebookmaker-0-10-epub2-ncx.epub": {
        "default": "read",
        "toc": {"The Strange Case Of Dr. Jekyll And Mr. Hyde": "skip:title page", "Contents": "skip:contents"},
        "outside": PG,
    },
    "pride-and-prejudice-pg-licence-in-last-chapter-epub2-ncx.epub": {
        "default": "read",
        "toc": {"Pride and Prejudice": "skip:title page", "Contents": "skip:contents"},
        "outside": {**PG, "OEBPS/2496186185910973392_1342-h-0.htm.html": "skip:transcriber's note"},
    },
    "beowulf-pg-sidenotes-footnotes-glossary-epub2-ncx.epub": {
        "default": "read",
        # The header entry's own text is the title page (the PG header itself is its own part).
        "toc": {"The Project Gutenberg eBook of Beowulf, by": "skip:title page",
                "THE FULL PROJECT GUTENBERG LICENSE": "skip:licence",
                "ABBREVIATIONS USED IN THE NOTES.": "either", "BIBLIOGRAPHY OF TRANSLATIONS.": "either",
                "GLOSSARY OF PROPER NAMES.": "either", "LIST OF WORDS AND PHRASES NOT IN GENERAL USE.": "either",
                "BEOWULF.": "either", "ADDENDA.": "either"},
        "outside": PG,
    },
    "fleurs-du-mal-fr-poetry-pg-epub2-ncx.epub": {
        "default": "read",
        "toc": {"LES FLEURS DU MAL": "skip:title page", "par CHARLES BAUDELAIRE": "skip:title page"},
        "outside": PG,
    },
    "esprit-des-lois-fr-deep-toc-epub2-ncx.epub": {
        "default": "read",
        "toc": {"MONTESQUIEU": "skip:title page", "#1": "skip:title page", "LIVRES I-V": "skip:title page",
                "PRÉCÉDÉS D'UNE INTRODUCTION DE L'ÉDITEUR": "skip:title page",
                "et suivis d'un Appendice": "skip:title page", "CONTENANT DES EXTRAITS DE MONTESQUIEU": "skip:title page",
                "et des Notes explicatives": "skip:title page", "PAUL JANET": "skip:title page",
                "PARIS LIBRAIRIE CH. DELAGRAVE": "skip:title page", "TABLE DES MATIÈRES": "skip:contents",
                "DE": "either"},
        "outside": {**PG, "OEBPS/458197273554026603_27573-h-0.htm.html": "skip:transcriber's note"},
    },
    "sanguo-yanyi-zh-pg-no-toc-epub3.epub": {
        "default": "read", "toc": {"THE FULL PROJECT GUTENBERG LICENSE": "skip:licence"},
        "within": {"Produced by Jian-Lun Huang": "skip:credits"},
        "outside": {**PG, **{f"OEBPS/6920862759530046876_23950-0-{i}.txt.xhtml": "read" for i in range(9)}},
    },
    # -- books we made ------------------------------------------------------------------------
    "moby-dick-calibre-from-txt.epub": {
        # One entry, "Start", on calibre's cover page: the title block then the three chapters.
        "default": "read", "toc": {},
        "within": {"MOBY-DICK; or, THE WHALE. By Herman Melville": "skip:title page"}, "outside": {},
    },
    "a-tale-of-two-cities-calibre-from-html.epub": {"default": "read", "toc": {}, "outside": {}},
    "vingt-mille-lieues-calibre-from-docx.epub": {
        "default": "read", "toc": {},
        "outside": {"index.html": "skip:title page"},
    },
    "the-waste-land-calibre-from-epub.epub": {
        "default": "read", "toc": {}, "outside": {"EPUB/wasteland-content.xhtml": "either"},
    },
    "drawn-panels-comic-fixed-layout-epub3.epub": {"default": "either", "toc": {}, "outside": {}},
    "laozi-no-toc-hard-wrapped-zh-epub2.epub": {
        "default": "read", "toc": {}, "outside": {f"OEBPS/text-{i}.html": "read" for i in range(1, 10)},
    },
    "whaling-glossary-dictionary-a-z-epub3.epub": {
        "default": "read", "toc": {"Title Page": "skip:title page"}, "outside": {},
    },
}


def within(book: str) -> dict[str, str]:
    """Strings inside a book's parts that have a class of their own (text → class): what a listener
    does not want read even inside a chapter, such as a note's back-link "( return )" or a
    producer's credit at the top of the text."""
    return LABELS[book].get("within", {})


def expected_class(book: str, part) -> str:
    """The class a part of the book should get (a bench/corpus_parts.Part)."""
    spec = LABELS[book]
    if part.kind != "toc":
        return spec["outside"][part.label]
    return spec["toc"].get(f"#{part.index}", spec["toc"].get(part.label, spec["default"]))
