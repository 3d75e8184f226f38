-- flights: one week of departures of a few European airlines.
CREATE TABLE airports (
  code TEXT PRIMARY KEY, -- IATA code
  name TEXT NOT NULL,
  city TEXT NOT NULL,
  country TEXT NOT NULL
);

CREATE TABLE airlines (
  airline_id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  country TEXT NOT NULL
);

CREATE TABLE flights (
  flight_id INTEGER PRIMARY KEY,
  flight_number TEXT NOT NULL,
  airline_id INTEGER NOT NULL REFERENCES airlines(airline_id),
  origin TEXT NOT NULL REFERENCES airports(code),
  destination TEXT NOT NULL REFERENCES airports(code),
  departure TEXT NOT NULL, -- local time, 'YYYY-MM-DD HH:MM'
  distance_km INTEGER NOT NULL,
  status TEXT NOT NULL -- 'on time', 'delayed' or 'cancelled'
);

INSERT INTO airports VALUES
  ('FRA', 'Frankfurt Airport', 'Frankfurt', 'Germany'),
  ('MUC', 'Munich Airport', 'Munich', 'Germany'),
  ('BER', 'Berlin Brandenburg Airport', 'Berlin', 'Germany'),
  ('CDG', 'Paris Charles de Gaulle Airport', 'Paris', 'France'),
  ('AMS', 'Amsterdam Airport Schiphol', 'Amsterdam', 'Netherlands'),
  ('MAD', 'Adolfo Suarez Madrid-Barajas Airport', 'Madrid', 'Spain'),
  ('LIS', 'Humberto Delgado Airport', 'Lisbon', 'Portugal');

INSERT INTO airlines VALUES
  (1, 'Lufthansa', 'Germany'),
  (2, 'Air France', 'France'),
  (3, 'KLM', 'Netherlands'),
  (4, 'Iberia', 'Spain'),
  (5, 'TAP Air Portugal', 'Portugal');

INSERT INTO flights VALUES
  (1, 'LH1114', 1, 'FRA', 'MAD', '2025-03-03 07:05', 1420, 'on time'),
  (2, 'LH2228', 1, 'MUC', 'CDG', '2025-03-03 09:40', 685, 'delayed'),
  (3, 'AF1019', 2, 'CDG', 'FRA', '2025-03-03 12:15', 450, 'on time'),
  (4, 'KL1765', 3, 'AMS', 'BER', '2025-03-04 06:50', 577, 'cancelled'),
  (5, 'IB3171', 4, 'MAD', 'LIS', '2025-03-04 10:30', 514, 'on time'),
  (6, 'TP1274', 5, 'LIS', 'AMS', '2025-03-04 14:05', 1863, 'delayed'),
  (7, 'LH1806', 1, 'FRA', 'LIS', '2025-03-05 08:20', 1890, 'cancelled'),
  (8, 'AF1234', 2, 'CDG', 'MAD', '2025-03-05 11:55', 1054, 'cancelled'),
  (9, 'KL1827', 3, 'AMS', 'MUC', '2025-03-06 07:30', 666, 'on time'),
  (10, 'LH1960', 1, 'BER', 'MUC', '2025-03-06 16:45', 504, 'cancelled'),
  (11, 'IB3402', 4, 'MAD', 'CDG', '2025-03-07 09:10', 1054, 'delayed'),
  (12, 'TP0576', 5, 'LIS', 'FRA', '2025-03-07 13:25', 1890, 'on time');
