"""What a narrator says for written Italian: the Italian normaliser's table of cases, by category.

Each case is (written, [readings]): it passes when the normaliser's output equals any one of the
readings. An abbreviation's period that ends the text is kept (it also ends the sentence).
The sentences are ours, written from how Italian narrators read aloud: numbers are one
word ("milleduecento"), "uno" becomes "un" or "una" before a noun, and Roman numerals after a
ruler's name, "secolo" or a book's part are ordinals ("Luigi quattordicesimo", "Canto primo").
Categories in HEADINGS are normalised as headings.
"""

CARDINALS = [
    ("2 ½ ore", ["due ore e mezza", "due ore e mezzo"]),
    ("¾ del tempo", ["tre quarti del tempo"]),
    ("Rossi & Figli", ["Rossi e Figli"]),
    ("Aveva 53 anni.", ["Aveva cinquantatré anni."]),
    ("Erano 11 uomini.", ["Erano undici uomini."]),
    ("C’erano 0 errori.", ["C’erano zero errori."]),
    ("Contò fino a 1.", ["Contò fino a uno."]),
    ("Aveva 1 figlio.", ["Aveva un figlio."]),
    ("Aveva 1 figlia.", ["Aveva una figlia."]),
    ("Aveva 21 anni.", ["Aveva ventuno anni.", "Aveva ventun anni."]),
    ("Aveva 23 anni.", ["Aveva ventitré anni."]),
    ("C’erano 100 soldati.", ["C’erano cento soldati."]),
    ("una città di 1.234 abitanti", ["una città di milleduecentotrentaquattro abitanti"]),
    ("una città di 1 234 abitanti", ["una città di milleduecentotrentaquattro abitanti"]),
    ("una città di 1’234 abitanti", ["una città di milleduecentotrentaquattro abitanti"]),
    ("1.000.000 di persone", ["un milione di persone"]),
    ("20.000 leghe", ["ventimila leghe"]),
    ("Il valore è 3,14.", ["Il valore è tre virgola quattordici.", "Il valore è tre virgola uno quattro."]),
    ("1.234,5", ["milleduecentotrentaquattro virgola cinque"]),
    ("0,5", ["zero virgola cinque"]),
    ("Scese a -5.", ["Scese a meno cinque."]),
    ("pagine 12-15", ["pagine dodici-quindici", "pagine da dodici a quindici", "pagine dodici a quindici"]),
    ("tra 3 e 4 ore", ["tra tre e quattro ore"]),
    ("il modello B2", ["il modello B due"]),
    ("Ha 8 anni.", ["Ha otto anni."]),
    ("l’8 settembre", ["l’otto settembre"]),
    ("Costa 33 soldi.", ["Costa trentatré soldi."]),
]

ORDINALS = [
    ("il 1º posto", ["il primo posto"]),
    ("il 1° posto", ["il primo posto"]),
    ("il 3° piano", ["il terzo piano"]),
    ("la 2ª volta", ["la seconda volta"]),
    ("Il 3° piano era vuoto.", ["Il terzo piano era vuoto."]),
    ("la 2a volta", ["la seconda volta"]),
    ("il 10º anniversario", ["il decimo anniversario"]),
    ("il 21° secolo", ["il ventunesimo secolo"]),
    ("il secolo XIX", ["il secolo diciannovesimo"]),
    ("il XIX secolo", ["il diciannovesimo secolo"]),
    ("nel XV secolo", ["nel quindicesimo secolo"]),
    ("del XX secolo", ["del ventesimo secolo"]),
    ("nel II secolo a.C.", ["nel secondo secolo avanti Cristo.", "nel secondo secolo avanti Cristo"]),
    ("la 5ª classe", ["la quinta classe"]),
    ("il 100° giorno", ["il centesimo giorno"]),
    ("fa 20° all’ombra", ["fa venti gradi all’ombra"]),
]

YEARS = [
    ("nel 1492", ["nel millequattrocentonovantadue"]),
    ("Nel 1861 nacque il Regno.", ["Nel milleottocentosessantuno nacque il Regno."]),
    ("nel 2005", ["nel duemilacinque"]),
    ("nel 1900", ["nel millenovecento"]),
    ("dal 1915 al 1918", ["dal millenovecentoquindici al millenovecentodiciotto"]),
    ("1915-1918", ["millenovecentoquindici-millenovecentodiciotto", "millenovecentoquindici millenovecentodiciotto",
                   "millenovecentoquindici a millenovecentodiciotto"]),
    ("44 a.C.", ["quarantaquattro avanti Cristo.", "quarantaquattro avanti Cristo"]),
    ("44 a. C.", ["quarantaquattro avanti Cristo.", "quarantaquattro avanti Cristo"]),
    ("Morì nel 44 a.C.", ["Morì nel quarantaquattro avanti Cristo."]),
    ("nel 476 d.C.", ["nel quattrocentosettantasei dopo Cristo.", "nel quattrocentosettantasei dopo Cristo"]),
    ("nel 476 d. C.", ["nel quattrocentosettantasei dopo Cristo.", "nel quattrocentosettantasei dopo Cristo"]),
    ("nel 753 a.C. fu fondata Roma", ["nel settecentocinquantatré avanti Cristo fu fondata Roma"]),
    ("il 1943", ["il millenovecentoquarantatré"]),
    ("nell’anno 1000", ["nell’anno mille"]),
]

DATES = [
    ("il 2 giugno 1946", ["il due giugno millenovecentoquarantasei"]),
    ("il 1º maggio", ["il primo maggio"]),
    ("il 1 maggio", ["il primo maggio"]),
    ("l’8 settembre 1943", ["l’otto settembre millenovecentoquarantatré"]),
    ("l’11 settembre", ["l’undici settembre"]),
    ("il 25 aprile 1945", ["il venticinque aprile millenovecentoquarantacinque"]),
    ("lunedì 3 marzo", ["lunedì tre marzo"]),
    ("il 2/6/1946", ["il due giugno millenovecentoquarantasei"]),
    ("il 20.9.1870", ["il venti settembre milleottocentosettanta"]),
    ("nel maggio 1915", ["nel maggio millenovecentoquindici"]),
    ("Roma, 4 novembre 1918", ["Roma, quattro novembre millenovecentodiciotto"]),
    ("il 1/1/2000", ["il primo gennaio duemila"]),
    ("il 21 aprile", ["il ventuno aprile"]),
]

TIMES = [
    ("Alle 8.30 partì il treno.", ["Alle otto e trenta partì il treno."]),
    ("le 2,50 lire", ["le due virgola cinquanta lire", "le due lire e cinquanta centesimi"]),
    ("alle 14,30", ["alle quattordici e trenta"]),
    ("alle 14.30", ["alle quattordici e trenta"]),
    ("alle 14:30", ["alle quattordici e trenta"]),
    ("alle ore 8.15", ["alle ore otto e quindici", "alle ore otto e un quarto"]),
    ("alle 9,05", ["alle nove e cinque"]),
    ("alle 10:00", ["alle dieci"]),
    ("all’1:15", ["all’una e quindici", "all’una e un quarto"]),
    ("dalle 9 alle 17", ["dalle nove alle diciassette"]),
    ("alle 21,45", ["alle ventuno e quarantacinque"]),
    ("verso le 20.30", ["verso le venti e trenta"]),
    ("ore 14,30", ["ore quattordici e trenta"]),
    ("Il treno parte alle 7.45.", ["Il treno parte alle sette e quarantacinque."]),
]

CURRENCY = [
    ("Costa 12,50 €.", ["Costa dodici euro e cinquanta centesimi.", "Costa dodici euro e cinquanta."]),
    ("1 €", ["un euro"]),
    ("100 €", ["cento euro"]),
    ("0,50 €", ["cinquanta centesimi"]),
    ("1.000.000 €", ["un milione di euro"]),
    ("20 lire", ["venti lire"]),
    ("1 lira", ["una lira"]),
    ("1.000 lire", ["mille lire"]),
    ("L. 500", ["cinquecento lire"]),
    ("$10", ["dieci dollari"]),
    ("10 $", ["dieci dollari"]),
    ("1 $", ["un dollaro"]),
    ("£5", ["cinque sterline"]),
    ("€ 20", ["venti euro"]),
    ("5 scudi", ["cinque scudi"]),
    ("2.000.000 $", ["due milioni di dollari"]),
]

UNITS = [
    ("Era alto 1,80 m.", ["Era alto un metro e ottanta.", "Era alto uno virgola ottanta metri."]),
    ("5 km", ["cinque chilometri"]),
    ("1 km", ["un chilometro"]),
    ("1,5 km", ["uno virgola cinque chilometri", "un chilometro e mezzo"]),
    ("30 cm", ["trenta centimetri"]),
    ("3 m", ["tre metri"]),
    ("2 kg", ["due chilogrammi", "due chili"]),
    ("500 g", ["cinquecento grammi"]),
    ("2 l", ["due litri"]),
    ("1 t", ["una tonnellata"]),
    ("3 t", ["tre tonnellate"]),
    ("20 °C", ["venti gradi centigradi", "venti gradi Celsius", "venti gradi"]),
    ("-5 °C", ["meno cinque gradi centigradi", "meno cinque gradi Celsius", "meno cinque gradi"]),
    ("50 %", ["cinquanta per cento"]),
    ("50%", ["cinquanta per cento"]),
    ("a 90 km/h", ["a novanta chilometri orari", "a novanta chilometri all’ora"]),
    ("100 m²", ["cento metri quadrati", "cento metri quadri"]),
    ("un angolo di 45°", ["un angolo di quarantacinque gradi"]),
    ("3 ha", ["tre ettari"]),
]

ABBREVIATIONS = [
    ("il sig. di Lampedusa", ["il signor di Lampedusa"]),
    ("il sig. Rossi", ["il signor Rossi"]),
    ("Sig. Rossi, venga.", ["Signor Rossi, venga."]),
    ("la sig.ra Bianchi", ["la signora Bianchi"]),
    ("la sig.na Verdi", ["la signorina Verdi"]),
    ("i sigg. Rossi", ["i signori Rossi"]),
    ("il dott. Rossi", ["il dottor Rossi"]),
    ("la dott.ssa Neri", ["la dottoressa Neri"]),
    ("il prof. Bianchi", ["il professor Bianchi"]),
    ("l’avv. Verdi", ["l’avvocato Verdi"]),
    ("l’ing. Rossi", ["l’ingegner Rossi"]),
    ("mele, pere, ecc.", ["mele, pere, eccetera."]),
    ("mele, ecc., e pere", ["mele, eccetera, e pere"]),
    ("frutta, ad es. mele", ["frutta, ad esempio mele"]),
    ("vedi pag. 12", ["vedi pagina dodici"]),
    ("vedi p. 12", ["vedi pagina dodici"]),
    ("vedi pagg. 12-15", ["vedi pagine dodici-quindici", "vedi pagine da dodici a quindici",
                          "vedi pagine dodici a quindici"]),
    ("il n. 5", ["il numero cinque"]),
    ("S. Pietro", ["San Pietro"]),
    ("S. Maria Novella", ["Santa Maria Novella"]),
    ("cfr. cap. 3", ["confronta capitolo tre"]),
    ("vol. 2", ["Volume due", "volume due"]),
    ("ca. 20 persone", ["circa venti persone"]),
    ("l’on. Rossi", ["l’onorevole Rossi"]),
]

ROMAN = [
    ("Pagina XII", ["Pagina dodicesima", "Pagina dodici"]),
    ("Capitolo XII", ["Capitolo dodicesimo", "Capitolo dodici"]),
    ("Capitolo I", ["Capitolo primo", "Capitolo uno"]),
    ("Canto XXVI", ["Canto ventiseiesimo"]),
    ("Parte II", ["Parte seconda"]),
    ("Libro III", ["Libro terzo"]),
    ("Atto I, scena II", ["Atto primo, scena seconda"]),
    ("Luigi XIV", ["Luigi quattordicesimo"]),
    ("Luigi XIV regnò a lungo.", ["Luigi quattordicesimo regnò a lungo."]),
    ("Vittorio Emanuele II", ["Vittorio Emanuele secondo"]),
    ("Pio IX", ["Pio nono"]),
    ("Giovanni XXIII", ["Giovanni ventitreesimo"]),
    ("Elisabetta II", ["Elisabetta seconda"]),
    ("Carlo V", ["Carlo quinto"]),
    ("Federico II di Svevia", ["Federico secondo di Svevia"]),
    ("Napoleone III", ["Napoleone terzo"]),
    ("la vitamina C", ["la vitamina C"]),
    ("Umberto I", ["Umberto primo"]),
    ("Gregorio VII", ["Gregorio settimo"]),
]

HEADING = [
    ("XII", ["Dodici"]),
    ("IV. La partenza", ["Quattro. La partenza"]),
    ("CAPITOLO IV", ["CAPITOLO quarto", "Capitolo quarto", "CAPITOLO quattro"]),
    ("Capitolo 3", ["Capitolo tre"]),
    ("Capitolo primo", ["Capitolo primo"]),
]

PLAIN = [
    ("Il capitano parlò.", ["Il capitano parlò."]),
    ("Che ne pensa?", ["Che ne pensa?"]),
    ("«Sì», disse lui.", ["«Sì», disse lui."]),
    ("Era mezzogiorno.", ["Era mezzogiorno."]),
    ("Nel mezzo del cammin di nostra vita", ["Nel mezzo del cammin di nostra vita"]),
    ("Arrivò a Roma.", ["Arrivò a Roma."]),
    ("Vide il mare.", ["Vide il mare."]),
    ("Di che si tratta?", ["Di che si tratta?"]),
]

CATEGORIES = {
    "cardinals": CARDINALS, "ordinals": ORDINALS, "years and eras": YEARS, "dates": DATES,
    "times": TIMES, "currency": CURRENCY, "units": UNITS, "abbreviations": ABBREVIATIONS,
    "roman numerals": ROMAN, "headings": HEADING, "plain text": PLAIN,
}
HEADINGS = {"headings"}
