# Korean dates for a shop whose times are UTC and 24-hour (Django's own Korean formats use a 12-hour clock
# and unpadded months in the short form).
DATE_FORMAT = "Y년 n월 j일"
DATETIME_FORMAT = "Y년 n월 j일 H:i"
SHORT_DATE_FORMAT = "Y-m-d"
SHORT_DATETIME_FORMAT = "Y-m-d H:i"
TIME_FORMAT = "H:i"
DECIMAL_SEPARATOR = "."
THOUSAND_SEPARATOR = ","
NUMBER_GROUPING = 3
