"""The shipped SQLite schemas and query tasks.

Each schema is a script of ``CREATE TABLE`` and ``INSERT`` statements; each task names its schema,
asks a question in words and carries the reference query whose result set is the answer. A task
with ``ordered=True`` asks for a specific row order (its reference has an ``ORDER BY``).

``TASK_SOURCE`` declares them to the kernel's task API (``openenv.tasks``): each task sits in the
``train`` or the ``test`` split, and its data is the whole task, so a declared task plays the same
query even when the shipped list changes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from openenv.tasks import InlineTasks
from openenv.tasks import Task as DeclaredTask

__all__ = ["SCHEMAS", "TASKS", "TASK_SOURCE", "Task", "from_declared"]

SCHEMAS: dict[str, str] = {
    "shop": """
CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, city TEXT NOT NULL);
CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT NOT NULL, price REAL NOT NULL, category TEXT NOT NULL);
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id),
                     product_id INTEGER NOT NULL REFERENCES products(id), quantity INTEGER NOT NULL,
                     ordered_on TEXT NOT NULL);
INSERT INTO customers VALUES (1, 'Ada', 'London'), (2, 'Grace', 'New York'), (3, 'Linus', 'Helsinki'),
                             (4, 'Barbara', 'New York'), (5, 'Ken', 'Berkeley');
INSERT INTO products VALUES (1, 'keyboard', 49.5, 'hardware'), (2, 'mouse', 19.0, 'hardware'),
                            (3, 'editor', 99.0, 'software'), (4, 'compiler', 250.0, 'software'),
                            (5, 'monitor', 180.0, 'hardware');
INSERT INTO orders VALUES (1, 1, 1, 2, '2024-01-03'), (2, 1, 3, 1, '2024-01-05'), (3, 2, 4, 1, '2024-02-11'),
                          (4, 3, 2, 3, '2024-02-12'), (5, 2, 5, 2, '2024-03-01'), (6, 4, 1, 1, '2024-03-02'),
                          (7, 1, 4, 1, '2024-03-15'), (8, 3, 3, 2, '2024-04-01');
""",
    "school": """
CREATE TABLE students (id INTEGER PRIMARY KEY, name TEXT NOT NULL, year INTEGER NOT NULL);
CREATE TABLE courses (id INTEGER PRIMARY KEY, title TEXT NOT NULL, credits INTEGER NOT NULL);
CREATE TABLE enrollments (student_id INTEGER NOT NULL REFERENCES students(id),
                          course_id INTEGER NOT NULL REFERENCES courses(id), grade INTEGER,
                          PRIMARY KEY (student_id, course_id));
INSERT INTO students VALUES (1, 'Alice', 1), (2, 'Bob', 2), (3, 'Chen', 2), (4, 'Dana', 3), (5, 'Eve', 1);
INSERT INTO courses VALUES (1, 'Algebra', 5), (2, 'Databases', 6), (3, 'Poetry', 3), (4, 'Physics', 6);
INSERT INTO enrollments VALUES (1, 1, 90), (1, 2, 85), (2, 2, 70), (2, 4, 65), (3, 1, 88), (3, 2, 92),
                               (3, 3, 75), (4, 4, NULL), (5, 3, 95);
""",
}


@dataclass(frozen=True)
class Task:
    id: str
    schema: str
    question: str
    reference: str
    ordered: bool = False
    #: The task API's split: held-out tasks (``test``) mix both schemas and every kind of query.
    split: str = "train"


TASKS: tuple[Task, ...] = (
    Task("shop_new_york", "shop", "List the names of the customers who live in New York.",
         "SELECT name FROM customers WHERE city = 'New York'"),
    Task("shop_hardware_by_price", "shop",
         "List the name and price of every hardware product, most expensive first.",
         "SELECT name, price FROM products WHERE category = 'hardware' ORDER BY price DESC", ordered=True),
    Task("shop_order_count", "shop", "How many orders are there? Return one row with one number.",
         "SELECT COUNT(*) FROM orders"),
    Task("shop_spend_per_customer", "shop",
         "For each customer who ordered anything, return their name and total spend (price * quantity).",
         "SELECT c.name, SUM(p.price * o.quantity) FROM orders o JOIN customers c ON c.id = o.customer_id "
         "JOIN products p ON p.id = o.product_id GROUP BY c.id", split="test"),
    Task("shop_never_ordered", "shop", "List the names of the customers who never placed an order.",
         "SELECT name FROM customers WHERE id NOT IN (SELECT customer_id FROM orders)"),
    Task("shop_top_product", "shop",
         "Which product sold the most units? Return its name and the number of units.",
         "SELECT p.name, SUM(o.quantity) AS units FROM orders o JOIN products p ON p.id = o.product_id "
         "GROUP BY p.id ORDER BY units DESC LIMIT 1"),
    Task("school_databases", "school", "List the names of the students enrolled in 'Databases'.",
         "SELECT s.name FROM students s JOIN enrollments e ON e.student_id = s.id "
         "JOIN courses c ON c.id = e.course_id WHERE c.title = 'Databases'"),
    Task("school_average_grade", "school",
         "For each course, return its title and the average grade (ignore missing grades; courses "
         "without any grade are left out).",
         "SELECT c.title, AVG(e.grade) FROM courses c JOIN enrollments e ON e.course_id = c.id "
         "WHERE e.grade IS NOT NULL GROUP BY c.id", split="test"),
    Task("school_credits_by_student", "school",
         "Return each student's name and their total enrolled credits, highest first, ties by name.",
         "SELECT s.name, COALESCE(SUM(c.credits), 0) AS total FROM students s "
         "LEFT JOIN enrollments e ON e.student_id = s.id LEFT JOIN courses c ON c.id = e.course_id "
         "GROUP BY s.id ORDER BY total DESC, s.name", ordered=True),
    Task("school_missing_grades", "school",
         "Return the student name and course title of every enrollment without a grade.",
         "SELECT s.name, c.title FROM enrollments e JOIN students s ON s.id = e.student_id "
         "JOIN courses c ON c.id = e.course_id WHERE e.grade IS NULL", split="test"),
)


#: The shipped tasks as the kernel's task source: 7 train, 3 test (``SqlEnv.tasks``).
TASK_SOURCE = InlineTasks(
    [DeclaredTask(id=t.id, split=t.split, data={k: v for k, v in asdict(t).items() if k not in ("id", "split")})
     for t in TASKS], name="openenv_env_sql.tasks.TASKS")


def from_declared(task: DeclaredTask) -> Task:
    """The SQL task a declared task's data describes (``ValidationError``-ready ``ValueError`` if
    it does not describe one)."""
    data = task.data
    missing = [k for k in ("schema", "question", "reference") if not isinstance(data.get(k), str)]
    if missing:
        raise ValueError(f"task {task.id!r} has no usable {', '.join(missing)} in its data; a SQL task's "
                         "data is {schema, question, reference, ordered}")
    if data["schema"] not in SCHEMAS:
        raise ValueError(f"task {task.id!r} names schema {data['schema']!r}; the schemas are {sorted(SCHEMAS)}")
    return Task(id=task.id, schema=data["schema"], question=data["question"], reference=data["reference"],
                ordered=bool(data.get("ordered", False)), split=task.split)
