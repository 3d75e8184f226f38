-- bookstore: a small online bookshop (authors, books, customers, orders).
CREATE TABLE authors (
  author_id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  country TEXT NOT NULL,
  birth_year INTEGER
);

CREATE TABLE books (
  book_id INTEGER PRIMARY KEY,
  title TEXT NOT NULL,
  author_id INTEGER NOT NULL REFERENCES authors(author_id),
  genre TEXT NOT NULL,
  published_year INTEGER NOT NULL,
  price REAL NOT NULL
);

CREATE TABLE customers (
  customer_id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  city TEXT NOT NULL,
  joined_date TEXT NOT NULL -- ISO date
);

CREATE TABLE orders (
  order_id INTEGER PRIMARY KEY,
  customer_id INTEGER NOT NULL REFERENCES customers(customer_id),
  order_date TEXT NOT NULL -- ISO date
);

CREATE TABLE order_items (
  order_id INTEGER NOT NULL REFERENCES orders(order_id),
  book_id INTEGER NOT NULL REFERENCES books(book_id),
  quantity INTEGER NOT NULL,
  unit_price REAL NOT NULL,
  PRIMARY KEY (order_id, book_id)
);

INSERT INTO authors VALUES
  (1, 'Margaret Atwood', 'Canada', 1939),
  (2, 'Ursula K. Le Guin', 'United States', 1929),
  (3, 'Terry Pratchett', 'United Kingdom', 1948),
  (4, 'Alice Munro', 'Canada', 1931),
  (5, 'N. K. Jemisin', 'United States', 1972),
  (6, 'Andrzej Sapkowski', 'Poland', 1948),
  (7, 'Emily St. John Mandel', 'Canada', 1979);

INSERT INTO books VALUES
  (1, 'The Handmaid''s Tale', 1, 'dystopian', 1985, 14.99),
  (2, 'Oryx and Crake', 1, 'dystopian', 2003, 13.50),
  (3, 'A Wizard of Earthsea', 2, 'fantasy', 1968, 9.99),
  (4, 'The Left Hand of Darkness', 2, 'science fiction', 1969, 12.00),
  (5, 'Guards! Guards!', 3, 'fantasy', 1989, 10.99),
  (6, 'Small Gods', 3, 'fantasy', 1992, 11.49),
  (7, 'Dear Life', 4, 'short stories', 2012, 16.00),
  (8, 'The Fifth Season', 5, 'fantasy', 2015, 17.99),
  (9, 'The Last Wish', 6, 'fantasy', 1993, 15.25),
  (10, 'Station Eleven', 7, 'science fiction', 2014, 13.99),
  (11, 'Sea of Tranquility', 7, 'science fiction', 2022, 18.50),
  (12, 'Runaway', 4, 'short stories', 2004, 14.00);

INSERT INTO customers VALUES
  (1, 'Ingrid Larsen', 'Oslo', '2023-02-11'),
  (2, 'Tomas Novak', 'Prague', '2023-06-30'),
  (3, 'Aisha Bello', 'Lagos', '2024-01-05'),
  (4, 'Chen Wei', 'Taipei', '2024-03-19'),
  (5, 'Lucia Romero', 'Seville', '2024-08-02');

INSERT INTO orders VALUES
  (1, 1, '2023-12-20'),
  (2, 2, '2024-01-14'),
  (3, 1, '2024-02-03'),
  (4, 3, '2024-03-22'),
  (5, 4, '2024-05-09'),
  (6, 2, '2024-07-18'),
  (7, 5, '2024-11-27'),
  (8, 3, '2025-01-08');

INSERT INTO order_items VALUES
  (1, 1, 1, 14.99),
  (1, 5, 2, 10.99),
  (2, 8, 1, 17.99),
  (2, 9, 1, 15.25),
  (3, 10, 2, 13.99),
  (4, 3, 1, 9.99),
  (4, 4, 1, 12.00),
  (4, 11, 1, 18.50),
  (5, 6, 3, 11.49),
  (6, 7, 1, 16.00),
  (6, 2, 2, 13.50),
  (7, 12, 1, 14.00),
  (8, 8, 2, 17.99);
