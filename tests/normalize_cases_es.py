"""What a narrator says for written Spanish: the Spanish normaliser's table of cases, by category.

Each case is (written, [readings]): it passes when the normaliser's output equals any one of the
readings. An abbreviation's period that ends the text is kept (it also ends the sentence).
The sentences are ours, written from how Spanish narrators read aloud: "uno" shortens to
"un" before a noun ("veintiún años") and turns feminine before a feminine one ("veintiuna
pesetas", "doscientas millas"). Categories in HEADINGS are normalised as headings.
"""

CARDINALS = [
    ("Tenía 53 años.", ["Tenía cincuenta y tres años."]),
    ("Eran 11 hombres.", ["Eran once hombres."]),
    ("Había 0 errores.", ["Había cero errores."]),
    ("Contó hasta 1.", ["Contó hasta uno."]),
    ("Tenía 1 hijo.", ["Tenía un hijo."]),
    ("Tenía 21 años.", ["Tenía veintiún años."]),
    ("Tenía 1 hija.", ["Tenía una hija."]),
    ("Compró 21 casas.", ["Compró veintiuna casas."]),
    ("Recorrió 200 millas.", ["Recorrió doscientas millas."]),
    ("Recorrió 200 kilómetros a pie.", ["Recorrió doscientos kilómetros a pie."]),
    ("Había 100 soldados.", ["Había cien soldados."]),
    ("Había 101 soldados.", ["Había ciento un soldados."]),
    ("una ciudad de 1.234 habitantes", ["una ciudad de mil doscientos treinta y cuatro habitantes"]),
    ("una ciudad de 1 234 habitantes", ["una ciudad de mil doscientos treinta y cuatro habitantes"]),
    ("1.000.000 de personas", ["un millón de personas"]),
    ("20.000 leguas", ["veinte mil leguas"]),
    ("El valor es 3,14.", ["El valor es tres coma catorce.", "El valor es tres coma uno cuatro."]),
    ("1.234,5", ["mil doscientos treinta y cuatro coma cinco"]),
    ("0,5", ["cero coma cinco"]),
    ("Bajó a -5.", ["Bajó a menos cinco."]),
    ("páginas 12-15", ["páginas doce a quince", "páginas de la doce a la quince"]),
    ("entre 3 y 4 horas", ["entre tres y cuatro horas"]),
    ("el modelo B2", ["el modelo B dos"]),
    ("Tiene 31 días.", ["Tiene treinta y un días."]),
    ("Hay 41 razones.", ["Hay cuarenta y una razones."]),
]

ORDINALS = [
    ("el 1º de la clase", ["el primero de la clase"]),
    ("el 1.º de la clase", ["el primero de la clase"]),
    ("el 1.er piso", ["el primer piso"]),
    ("el 1er piso", ["el primer piso"]),
    ("el 3er día", ["el tercer día"]),
    ("la 1ª vez", ["la primera vez"]),
    ("La 1ª vez fue mejor.", ["La primera vez fue mejor."]),
    ("la 2.ª parte", ["la segunda parte"]),
    ("el 3º piso", ["el tercer piso", "el tercero piso"]),
    ("el 3° lugar", ["el tercer lugar", "el tercero lugar"]),
    ("el 5º día", ["el quinto día"]),
    ("la 10ª edición", ["la décima edición"]),
    ("el siglo XIX", ["el siglo diecinueve", "el siglo decimonoveno"]),
    ("el siglo XXI", ["el siglo veintiuno", "el siglo vigésimo primero"]),
    ("en el siglo V", ["en el siglo cinco", "en el siglo quinto"]),
    ("el 2º y el 3º", ["el segundo y el tercero"]),
]

YEARS = [
    ("en 1492", ["en mil cuatrocientos noventa y dos"]),
    ("En 1939 terminó la guerra.", ["En mil novecientos treinta y nueve terminó la guerra."]),
    ("en 2005", ["en dos mil cinco"]),
    ("en 1900", ["en mil novecientos"]),
    ("de 1936 a 1939", ["de mil novecientos treinta y seis a mil novecientos treinta y nueve"]),
    ("1936-1939", ["mil novecientos treinta y seis a mil novecientos treinta y nueve"]),
    ("44 a. C.", ["cuarenta y cuatro antes de Cristo.", "cuarenta y cuatro antes de Cristo"]),
    ("44 a.C.", ["cuarenta y cuatro antes de Cristo.", "cuarenta y cuatro antes de Cristo"]),
    ("en el 44 a. de C.", ["en el cuarenta y cuatro antes de Cristo.", "en el cuarenta y cuatro antes de Cristo"]),
    ("Murió en el 44 a. C.", ["Murió en el cuarenta y cuatro antes de Cristo."]),
    ("en 476 d. C.", ["en cuatrocientos setenta y seis después de Cristo.",
                      "en cuatrocientos setenta y seis después de Cristo"]),
    ("en 476 d.C.", ["en cuatrocientos setenta y seis después de Cristo.",
                     "en cuatrocientos setenta y seis después de Cristo"]),
    ("el año 711 d. C. llegaron", ["el año setecientos once después de Cristo llegaron"]),
    ("en el siglo I a. C.", ["en el siglo uno antes de Cristo.", "en el siglo uno antes de Cristo",
                             "en el siglo primero antes de Cristo"]),
    ("753 a. C.", ["setecientos cincuenta y tres antes de Cristo.", "setecientos cincuenta y tres antes de Cristo"]),
]

DATES = [
    ("el 12 de octubre de 1492", ["el doce de octubre de mil cuatrocientos noventa y dos"]),
    ("el 1 de enero", ["el primero de enero", "el uno de enero"]),
    ("el 1.º de mayo", ["el primero de mayo"]),
    ("el 2 de mayo de 1808", ["el dos de mayo de mil ochocientos ocho"]),
    ("el 21 de marzo", ["el veintiuno de marzo"]),
    ("el 31 de diciembre", ["el treinta y uno de diciembre"]),
    ("lunes 3 de marzo", ["lunes tres de marzo"]),
    ("el 12/10/1492", ["el doce de octubre de mil cuatrocientos noventa y dos"]),
    ("el 18-7-1936", ["el dieciocho de julio de mil novecientos treinta y seis"]),
    ("en mayo de 1808", ["en mayo de mil ochocientos ocho"]),
    ("Madrid, 20 de noviembre de 1975",
     ["Madrid, veinte de noviembre de mil novecientos setenta y cinco"]),
    ("el 1/1/2000", ["el primero de enero de dos mil", "el uno de enero de dos mil"]),
]

TIMES = [
    ("a las 14:30", ["a las catorce y media", "a las catorce treinta", "a las catorce y treinta"]),
    ("las 14:30", ["las catorce y media", "las catorce treinta", "las catorce y treinta"]),
    ("a las 8:15", ["a las ocho y cuarto", "a las ocho quince"]),
    ("a las 10:00", ["a las diez"]),
    ("a la 1:00", ["a la una"]),
    ("a la 1:20", ["a la una y veinte"]),
    ("a las 9:05", ["a las nueve y cinco"]),
    ("a las 21:45", ["a las veintiuna y cuarenta y cinco", "a las veintiuna cuarenta y cinco"]),
    ("a las 8", ["a las ocho"]),
    ("a las 8 h", ["a las ocho"]),
    ("desde las 9 hasta las 17 h", ["desde las nueve hasta las diecisiete"]),
    ("a las 14.30 h", ["a las catorce y media", "a las catorce treinta", "a las catorce y treinta"]),
]

CURRENCY = [
    ("Cuesta 12,50 €.", ["Cuesta doce euros con cincuenta céntimos.", "Cuesta doce euros con cincuenta."]),
    ("1 €", ["un euro"]),
    ("21 €", ["veintiún euros"]),
    ("100 €", ["cien euros"]),
    ("0,50 €", ["cincuenta céntimos"]),
    ("1.000.000 €", ["un millón de euros"]),
    ("10 pesetas", ["diez pesetas"]),
    ("1 peseta", ["una peseta"]),
    ("21 pesetas", ["veintiuna pesetas"]),
    ("200 pesetas", ["doscientas pesetas"]),
    ("100 ptas. al mes", ["cien pesetas al mes"]),
    ("100 pts.", ["cien pesetas."]),
    ("$5", ["cinco dólares"]),
    ("5 $", ["cinco dólares"]),
    ("1 $", ["un dólar"]),
    ("£5", ["cinco libras"]),
    ("500 reales", ["quinientos reales"]),
]

UNITS = [
    ("Medía 1,80 m.", ["Medía un metro ochenta.", "Medía uno coma ochenta metros."]),
    ("5 km", ["cinco kilómetros"]),
    ("1 km", ["un kilómetro"]),
    ("21 km", ["veintiún kilómetros"]),
    ("1,5 km", ["uno coma cinco kilómetros", "un kilómetro y medio"]),
    ("30 cm", ["treinta centímetros"]),
    ("3 m", ["tres metros"]),
    ("2 kg", ["dos kilogramos", "dos kilos"]),
    ("500 g", ["quinientos gramos"]),
    ("2 l", ["dos litros"]),
    ("1 t", ["una tonelada"]),
    ("200 t", ["doscientas toneladas"]),
    ("20 °C", ["veinte grados centígrados", "veinte grados Celsius", "veinte grados"]),
    ("-5 °C", ["menos cinco grados centígrados", "menos cinco grados Celsius", "menos cinco grados"]),
    ("50 %", ["cincuenta por ciento"]),
    ("50%", ["cincuenta por ciento"]),
    ("100%", ["cien por cien", "cien por ciento"]),
    ("a 90 km/h", ["a noventa kilómetros por hora"]),
    ("100 m²", ["cien metros cuadrados"]),
    ("un ángulo de 45°", ["un ángulo de cuarenta y cinco grados"]),
]

ABBREVIATIONS = [
    ("el Sr. de la Vega", ["el señor de la Vega"]),
    ("el Sr. García", ["el señor García"]),
    ("Sr. García, venga.", ["Señor García, venga."]),
    ("la Sra. Pérez", ["la señora Pérez"]),
    ("la Srta. Ruiz", ["la señorita Ruiz"]),
    ("los Sres. López", ["los señores López"]),
    ("D. Quijote", ["don Quijote", "Don Quijote"]),
    ("y D. Juan dijo", ["y don Juan dijo"]),
    ("Dña. Elvira", ["doña Elvira", "Doña Elvira"]),
    ("D.ª Elvira", ["doña Elvira", "Doña Elvira"]),
    ("el Dr. Sánchez", ["el doctor Sánchez"]),
    ("la Dra. Sánchez", ["la doctora Sánchez"]),
    ("¿Cómo está Ud.?", ["¿Cómo está usted?"]),
    ("Vd. sabe", ["Usted sabe", "usted sabe"]),
    ("peras, manzanas, etc.", ["peras, manzanas, etcétera."]),
    ("peras, etc., y uvas", ["peras, etcétera, y uvas"]),
    ("frutas, p. ej. peras", ["frutas, por ejemplo peras"]),
    ("véase pág. 12", ["véase página doce"]),
    ("el núm. 5", ["el número cinco"]),
    ("el n.º 5", ["el número cinco"]),
    ("S. M. el Rey", ["Su Majestad el Rey"]),
    ("Sta. Teresa", ["santa Teresa", "Santa Teresa"]),
    ("los EE. UU.", ["los Estados Unidos."]),
    ("aprox. 20 personas", ["aproximadamente veinte personas"]),
    ("José D. Pérez", ["José D. Pérez"]),
]

ROMAN = [
    ("Página II", ["Página dos"]),
    ("Capítulo XII", ["Capítulo doce"]),
    ("Capítulo IV: la partida", ["Capítulo cuatro: la partida"]),
    ("Capítulo I", ["Capítulo uno", "Capítulo primero"]),
    ("Libro III", ["Libro tres", "Libro tercero"]),
    ("Tomo II", ["Tomo dos", "Tomo segundo"]),
    ("Felipe II", ["Felipe segundo"]),
    ("Felipe II reinó mucho.", ["Felipe segundo reinó mucho."]),
    ("Carlos V", ["Carlos quinto"]),
    ("Carlos I de España", ["Carlos primero de España"]),
    ("Alfonso X el Sabio", ["Alfonso décimo el Sabio"]),
    ("Alfonso XIII", ["Alfonso trece"]),
    ("Luis XIV", ["Luis catorce"]),
    ("Isabel II", ["Isabel segunda"]),
    ("Isabel I de Castilla", ["Isabel primera de Castilla"]),
    ("Pío IX", ["Pío nono", "Pío noveno"]),
    ("Juan Pablo II", ["Juan Pablo segundo"]),
    ("Fernando VII", ["Fernando séptimo"]),
    ("la vitamina C", ["la vitamina C"]),
    ("Acto I, escena III", ["Acto uno, escena tres", "Acto primero, escena tercera"]),
]

HEADING = [
    ("XII", ["Doce"]),
    ("IV. La partida", ["Cuatro. La partida"]),
    ("CAPÍTULO IV", ["CAPÍTULO cuatro", "Capítulo cuatro"]),
    ("Capítulo 3", ["Capítulo tres"]),
    ("Capítulo primero", ["Capítulo primero"]),
]

PLAIN = [
    ("El capitán habló.", ["El capitán habló."]),
    ("¿Qué piensa usted?", ["¿Qué piensa usted?"]),
    ("—Sí —dijo él.", ["—Sí —dijo él."]),
    ("Era mediodía.", ["Era mediodía."]),
    ("¡Qué barbaridad!", ["¡Qué barbaridad!"]),
    ("En un lugar de la Mancha", ["En un lugar de la Mancha"]),
    ("Llegó a Madrid.", ["Llegó a Madrid."]),
    ("Vio el mar.", ["Vio el mar."]),
]

CATEGORIES = {
    "cardinals": CARDINALS, "ordinals": ORDINALS, "years and eras": YEARS, "dates": DATES,
    "times": TIMES, "currency": CURRENCY, "units": UNITS, "abbreviations": ABBREVIATIONS,
    "roman numerals": ROMAN, "headings": HEADING, "plain text": PLAIN,
}
HEADINGS = {"headings"}
