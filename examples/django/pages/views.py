"""The example's pages: a fixed-size page, an SQLite workload, a CSRF-protected form, a
file upload, a streamed response, and Unicode in paths and query strings."""
import hashlib
import uuid

from django import forms
from django.db import connection, transaction
from django.db.models import F
from django.http import HttpResponse, HttpResponseNotAllowed, JsonResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.http import urlencode

from .models import Item, Note

PAGE_BYTES = 8750
ROWS = 10
REPEATS = 5


def index(request):
    return render(request, 'pages/index.html')


def page(request):
    """A page of exactly PAGE_BYTES bytes: the template, padded inside a comment."""
    html = render_to_string('pages/page.html', {'items': range(1, 41)}, request)
    body = html.encode()
    pad = PAGE_BYTES - len(body) - len('<!--  -->\n')
    if pad < 0:
        raise ValueError(f'pages/page.html renders to {len(body)} bytes, over {PAGE_BYTES}')
    body += b'<!-- ' + b'.' * pad + b' -->\n'
    return HttpResponse(body, content_type='text/html; charset=utf-8')


def workload(request):
    """10 inserts, 10 updates, 10 selects, 5 SELECT *, 5 LIKE selects, one delete.

    Rows carry a token of their own, so concurrent requests never see each other's rows
    and the counts are exact. The transaction starts with a write (see settings.py).
    """
    token = uuid.uuid4().hex
    with transaction.atomic():
        ids = [Item.objects.create(token=token, name=f'{token}-{i}', value=i).pk for i in range(ROWS)]
        updates = sum(Item.objects.filter(pk=pk).update(value=F('value') + 100) for pk in ids)
        values = [Item.objects.get(pk=pk).value for pk in ids]
        with connection.cursor() as cursor:
            select_all_rows = 0
            for _ in range(REPEATS):
                cursor.execute('SELECT * FROM pages_item WHERE token = %s', [token])
                select_all_rows += len(cursor.fetchall())
        like_rows = sum(len(list(Item.objects.filter(name__contains=f'{token}-'))) for _ in range(REPEATS))
        deleted, _ = Item.objects.filter(token=token).delete()
    return JsonResponse({
        'inserts': len(ids),
        'updates': updates,
        'selects': len(values),
        'value_sum': sum(values),
        'select_all_rows': select_all_rows,
        'like_rows': like_rows,
        'deleted': deleted,
    })


class NoteForm(forms.Form):
    name = forms.CharField(max_length=100)
    message = forms.CharField(widget=forms.Textarea, required=False)


def form(request):
    if request.method == 'POST':
        f = NoteForm(request.POST)
        if f.is_valid():
            Note.objects.create(**f.cleaned_data)
            # Post/redirect/get; reverse() includes SCRIPT_NAME (e.g. /app) by itself.
            return redirect(reverse('thanks') + '?' + urlencode({'name': f.cleaned_data['name']}))
    else:
        f = NoteForm()
    return render(request, 'pages/form.html', {'form': f})


def thanks(request):
    return render(request, 'pages/thanks.html', {'name': request.GET.get('name', ''), 'notes': Note.objects.count()})


class UploadForm(forms.Form):
    file = forms.FileField()


def upload(request):
    if request.method == 'POST':
        f = UploadForm(request.POST, request.FILES)
        if f.is_valid():
            up = f.cleaned_data['file']
            h = hashlib.sha256()
            for chunk in up.chunks():
                h.update(chunk)
            return JsonResponse({'name': up.name, 'bytes': up.size, 'sha256': h.hexdigest()})
        return JsonResponse({'errors': f.errors}, status=400)
    return render(request, 'pages/upload.html', {'form': UploadForm()})


# Block i of the streamed body is byte (i * 7 + 3) & 0xff, 64 KiB, repeated.
BLOCK = bytes((i * 7 + 3) & 0xFF for i in range(65536))


def stream(request):
    """`mb` MiB sent as it is produced (StreamingHttpResponse: no Content-Length)."""
    try:
        mb = min(int(request.GET.get('mb', '8')), 1024)
    except ValueError:
        mb = 8

    def blocks():
        for _ in range(mb * 16):
            yield BLOCK

    return StreamingHttpResponse(blocks(), content_type='application/octet-stream')


def hello(request, name):
    return JsonResponse({
        'name': name,
        'q': request.GET.get('q'),
        'path': request.path,
        'path_info': request.path_info,
        'script_name': request.META.get('SCRIPT_NAME'),
        'url': reverse('hello', args=[name]),
    }, json_dumps_params={'ensure_ascii': False})


def cafe(request):
    if request.method not in ('GET', 'HEAD'):
        return HttpResponseNotAllowed(['GET', 'HEAD'])
    return HttpResponse('café ☕\n', content_type='text/plain; charset=utf-8')
