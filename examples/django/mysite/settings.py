"""Settings for the fcgi-pm Django example (Debian's python3-django 3.2, SQLite).

Environment variables (set them in the pool's `env:` in fcgi-pm.yaml):
  DJANGO_DB_PATH        SQLite file (default: db.sqlite3 beside manage.py)
  DJANGO_SECRET_KEY     set a real one outside this example
  DJANGO_ALLOWED_HOSTS  comma-separated (default: localhost,127.0.0.1,[::1])
  DJANGO_DEBUG          "1" for Django's debug pages
"""
import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = os.environ.get('DJANGO_SECRET_KEY', 'fcgi-pm-example-key-not-secret-change-me-0123456789')
DEBUG = os.environ.get('DJANGO_DEBUG') == '1'
ALLOWED_HOSTS = os.environ.get('DJANGO_ALLOWED_HOSTS', 'localhost,127.0.0.1,[::1]').split(',')

INSTALLED_APPS = ['pages']

MIDDLEWARE = [
    'django.middleware.security.SecurityMiddleware',
    'django.middleware.common.CommonMiddleware',
    'django.middleware.csrf.CsrfViewMiddleware',
]

ROOT_URLCONF = 'mysite.urls'
WSGI_APPLICATION = 'mysite.wsgi.application'

TEMPLATES = [{
    'BACKEND': 'django.template.backends.django.DjangoTemplates',
    'DIRS': [],
    'APP_DIRS': True,
    'OPTIONS': {'context_processors': ['django.template.context_processors.request']},
}]

# SQLite under concurrent workers (each fcgi-pm worker is a process with its own
# connection):
# - 'timeout': the busy timeout in seconds. A writer that finds the database locked
#   waits (retrying) up to this long instead of failing at once with
#   "database is locked".
# - WAL journal (set in pages/apps.py on every new connection): readers do not block
#   the writer nor the writer the readers; synchronous=NORMAL is safe with WAL.
# - A transaction that reads first and writes later can still fail at once with
#   SQLITE_BUSY when another process wrote in between (the busy timeout does not apply
#   to a read transaction upgrading to write). pages/views.py starts its transaction
#   with a write, which waits on the busy timeout like any lock.
# - CONN_MAX_AGE keeps one connection per worker between requests (a worker serves one
#   request at a time, so one connection is enough).
DATABASES = {
    'default': {
        'ENGINE': 'django.db.backends.sqlite3',
        'NAME': os.environ.get('DJANGO_DB_PATH', str(BASE_DIR / 'db.sqlite3')),
        'OPTIONS': {'timeout': 20},
        'CONN_MAX_AGE': 300,
    }
}

DEFAULT_AUTO_FIELD = 'django.db.models.BigAutoField'
LANGUAGE_CODE = 'en-us'
TIME_ZONE = 'UTC'
USE_I18N = False
USE_TZ = True

# Uploads over 2.5 MB are spooled to a temporary file, not kept in memory.
FILE_UPLOAD_MAX_MEMORY_SIZE = 2621440

# Errors (500s with their traceback, 4xx warnings such as CSRF failures) go to stderr,
# which fcgi-pm captures into its log with the worker's pid.
LOGGING = {
    'version': 1,
    'disable_existing_loggers': False,
    'handlers': {'stderr': {'class': 'logging.StreamHandler'}},
    'loggers': {'django': {'handlers': ['stderr'], 'level': 'WARNING'}},
}
